/*
 * v1model.p4 for terrapin-p4c: the v1model architecture of BMv2's
 * simple_switch (V1Switch package, standard metadata, stateful externs).
 * Written for the Terrapin project; names, types, parameter directions,
 * enum members and annotations follow the published architecture file so
 * that v1model programs, their BMv2 JSON and their P4Info are unchanged.
 */
#ifndef _V1_MODEL_P4_
#define _V1_MODEL_P4_

#include "core.p4"

#ifndef V1MODEL_VERSION
#define V1MODEL_VERSION 20180101
#endif

match_kind {
    range,
    optional,
    selector
}

const bit<32> __v1model_version = V1MODEL_VERSION;

#if V1MODEL_VERSION >= 20200408
typedef bit<9>  PortId_t;
#endif

/* Per-packet intrinsic metadata; the @alias names are BMv2's own field
 * names, reported in the JSON "field_aliases" section. */
@metadata @name("standard_metadata")
struct standard_metadata_t {
#if V1MODEL_VERSION >= 20200408
    PortId_t ingress_port;
    PortId_t egress_spec;
    PortId_t egress_port;
#else
    bit<9>  ingress_port;
    bit<9>  egress_spec;
    bit<9>  egress_port;
#endif
    bit<32> instance_type;
    bit<32> packet_length;
    @alias("queueing_metadata.enq_timestamp")  bit<32> enq_timestamp;
    @alias("queueing_metadata.enq_qdepth")     bit<19> enq_qdepth;
    @alias("queueing_metadata.deq_timedelta")  bit<32> deq_timedelta;
    @alias("queueing_metadata.deq_qdepth")     bit<19> deq_qdepth;
    @alias("intrinsic_metadata.ingress_global_timestamp") bit<48> ingress_global_timestamp;
    @alias("intrinsic_metadata.egress_global_timestamp")  bit<48> egress_global_timestamp;
    @alias("intrinsic_metadata.mcast_grp")     bit<16> mcast_grp;
    @alias("intrinsic_metadata.egress_rid")    bit<16> egress_rid;
    /* 1 when a verify_checksum() call found a mismatch. */
    bit<1>  checksum_error;
    error   parser_error;
    @alias("intrinsic_metadata.priority")      bit<3>  priority;
}

enum CounterType {
    packets,
    bytes,
    packets_and_bytes
}

enum MeterType {
    packets,
    bytes
}

/* An array of counters indexed by the data plane. */
extern counter
#if V1MODEL_VERSION >= 20200408
<I>
#endif
{
    counter(bit<32> size, CounterType type);
#if V1MODEL_VERSION >= 20200408
    void count(in I index);
#else
    void count(in bit<32> index);
#endif
}

/* One counter per entry of the table it is attached to. */
extern direct_counter {
    direct_counter(CounterType type);
    void count();
}

#define V1MODEL_METER_COLOR_GREEN  0
#define V1MODEL_METER_COLOR_YELLOW 1
#define V1MODEL_METER_COLOR_RED    2

/* An array of two-rate three-colour meters (RFC 2698). */
extern meter
#if V1MODEL_VERSION >= 20200408
<I>
#endif
{
    meter(bit<32> size, MeterType type);
#if V1MODEL_VERSION >= 20200408
    void execute_meter<T>(in I index, out T result);
#else
    void execute_meter<T>(in bit<32> index, out T result);
#endif
}

/* One meter per entry of the table it is attached to. */
extern direct_meter<T> {
    direct_meter(MeterType type);
    void read(out T result);
}

/* Data-plane readable and writable state. */
extern register<T
#if V1MODEL_VERSION >= 20200408
, I
#endif
> {
    register(bit<32> size);
#if V1MODEL_VERSION >= 20200408
    @noSideEffects
    void read(out T result, in I index);
    void write(in I index, in T value);
#else
    @noSideEffects
    void read(out T result, in bit<32> index);
    void write(in bit<32> index, in T value);
#endif
}

/* Table implementation: a shared pool of action entries. */
extern action_profile {
    action_profile(bit<32> size);
}

/* A random number in lo..hi (inclusive). */
extern void random<T>(out T result, in T lo, in T hi);

/* Send data to the control plane; a named struct T names the digest. */
extern void digest<T>(in bit<32> receiver, in T data);

enum HashAlgorithm {
    crc32,
    crc32_custom,
    crc16,
    crc16_custom,
    random,
    identity,
    csum16,
    xor16
}

@deprecated("Please use mark_to_drop(standard_metadata) instead.")
extern void mark_to_drop();

/* Make the packet be dropped at the end of the current pipeline, unless a
 * later assignment changes egress_spec or mcast_grp again. */
@pure
extern void mark_to_drop(inout standard_metadata_t standard_metadata);

/* result = base + (hash(data) % max) when max >= 1, else base. */
@pure
extern void hash<O, T, D, M>(out O result, in HashAlgorithm algo, in T base, in D data, in M max);

/* Table implementation: action profile with member selection by hash. */
extern action_selector {
    action_selector(HashAlgorithm algorithm, bit<32> size, bit<32> outputWidth);
}

enum CloneType {
    I2E,
    E2E
}

@deprecated("Please use verify_checksum/update_checksum instead.")
extern Checksum16 {
    Checksum16();
    bit<16> get<D>(in D data);
}

/* Sets standard_metadata.checksum_error when condition holds and the
 * checksum of data differs from checksum. */
extern void verify_checksum<T, O>(in bool condition, in T data, in O checksum, HashAlgorithm algo);

/* Writes the checksum of data to checksum when condition holds. */
@pure
extern void update_checksum<T, O>(in bool condition, in T data, inout O checksum, HashAlgorithm algo);

/* As verify_checksum, with the unparsed payload appended to data. */
extern void verify_checksum_with_payload<T, O>(in bool condition, in T data, in O checksum, HashAlgorithm algo);

/* As update_checksum, with the unparsed payload appended to data. */
@noSideEffects
extern void update_checksum_with_payload<T, O>(in bool condition, in T data, inout O checksum, HashAlgorithm algo);

/* Clone the packet to the session's port at the end of this pipeline. */
extern void clone(in CloneType type, in bit<32> session);

@deprecated("Please use 'resubmit_preserving_field_list' instead")
extern void resubmit<T>(in T data);

/* Re-run ingress on the original packet, keeping the user metadata fields
 * annotated @field_list(index). */
extern void resubmit_preserving_field_list(bit<8> index);

@deprecated("Please use 'recirculate_preserving_field_list' instead")
extern void recirculate<T>(in T data);

/* Send the deparsed packet back to ingress, keeping the user metadata
 * fields annotated @field_list(index). */
extern void recirculate_preserving_field_list(bit<8> index);

@deprecated("Please use 'clone' or 'clone_preserving_field_list' instead")
extern void clone3<T>(in CloneType type, in bit<32> session, in T data);

/* clone() that keeps the user metadata fields annotated @field_list(index). */
extern void clone_preserving_field_list(in CloneType type, in bit<32> session, bit<8> index);

/* Keep only the first length bytes of the outgoing packet. */
extern void truncate(in bit<32> length);

/* Stop the program (in BMv2: abort) when check is false. */
extern void assert(in bool check);

/* Like assert, for formal tools; BMv2 treats it like assert. */
extern void assume(in bool check);

/* Write a message to the switch log. */
extern void log_msg(string msg);
extern void log_msg<T>(string msg, in T data);

/* The blocks of the architecture. */
parser Parser<H, M>(packet_in b,
                    out H parsedHdr,
                    inout M meta,
                    inout standard_metadata_t standard_metadata);

/* Only verify_checksum calls belong here. */
control VerifyChecksum<H, M>(inout H hdr,
                             inout M meta);

@pipeline
control Ingress<H, M>(inout H hdr,
                      inout M meta,
                      inout standard_metadata_t standard_metadata);

@pipeline
control Egress<H, M>(inout H hdr,
                     inout M meta,
                     inout standard_metadata_t standard_metadata);

/* Only update_checksum calls belong here. */
control ComputeChecksum<H, M>(inout H hdr,
                              inout M meta);

/* Only packet_out.emit calls belong here. */
@deparser
control Deparser<H>(packet_out b, in H hdr);

package V1Switch<H, M>(Parser<H, M> p,
                       VerifyChecksum<H, M> vr,
                       Ingress<H, M> ig,
                       Egress<H, M> eg,
                       ComputeChecksum<H, M> ck,
                       Deparser<H> dep
                       );

#endif  /* _V1_MODEL_P4_ */
