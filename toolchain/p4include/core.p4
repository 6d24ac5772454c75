/*
 * core.p4 for terrapin-p4c: the declarations every P4_16 program may use
 * (P4_16 language specification, appendix "core library"). Written for the
 * Terrapin project; the declarations match the published library so that
 * programs written against it compile unchanged.
 */
#ifndef _CORE_P4_
#define _CORE_P4_

/* Errors the parser can raise by itself. */
error {
    NoError,
    PacketTooShort,
    NoMatch,
    StackOutOfBounds,
    HeaderTooShort,
    ParserTimeout,
    ParserInvalidArgument
}

/* Input packet as seen by a parser. */
extern packet_in {
    void extract<T>(out T hdr);
    void extract<T>(out T variableSizeHeader, in bit<32> variableFieldSizeInBits);
    T lookahead<T>();
    void advance(in bit<32> sizeInBits);
    bit<32> length();
}

/* Output packet assembled by a deparser. */
extern packet_out {
    void emit<T>(in T hdr);
}

/* Stop parsing with an error unless check holds. */
extern void verify(in bool check, in error toSignal);

@noWarn("unused")
action NoAction() {}

/* Evaluated by the compiler: a false check stops compilation with the
   message. It returns true, so it can initialize a constant. */
extern bool static_assert(bool check, string message);
extern bool static_assert(bool check);

match_kind {
    exact,
    ternary,
    lpm
}

#endif  /* _CORE_P4_ */
