module github.com/terrapin/terrapin/toolchain

go 1.26.0

require (
	github.com/cilium/ebpf v0.22.0
	github.com/openconfig/gnmi v0.14.1
	github.com/p4lang/p4runtime v1.4.1
	golang.org/x/sys v0.49.0
	google.golang.org/genproto/googleapis/rpc v0.0.0-20261019180522-ce908d29299b
	google.golang.org/grpc v1.85.0
	google.golang.org/protobuf v1.36.12
)

require (
	github.com/apache/thrift v0.17.0 // indirect
	golang.org/x/net v0.60.0 // indirect
	golang.org/x/text v0.42.0 // indirect
)
