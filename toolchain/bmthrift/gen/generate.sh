#!/bin/sh
# Regenerates the Go code of BMv2's Thrift runtime services from BMv2's own
# IDL files with the Apache Thrift compiler (Debian's thrift-compiler 0.17.0,
# matching the Go module github.com/apache/thrift v0.17.0 in go.mod).
#
#   toolchain/bmthrift/gen/generate.sh [BMV2_SOURCE_TREE]
#
# The tree defaults to build/oracle/src/behavioral-model (make bmv2). The
# generated packages are committed: building the switch needs no compiler.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
src=${1:-$here/../../../build/oracle/src/behavioral-model}
command -v thrift >/dev/null || { echo "generate.sh: needs thrift (apt-get install thrift-compiler)" >&2; exit 1; }
case $(thrift --version) in *0.17.0*) ;; *) echo "generate.sh: want Thrift 0.17.0, have $(thrift --version)" >&2; exit 1;; esac
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for idl in thrift_src/standard.thrift thrift_src/simple_pre_lag.thrift targets/simple_switch/thrift/simple_switch.thrift; do
    thrift --gen go:package_prefix=github.com/terrapin/terrapin/toolchain/bmthrift/gen/,thrift_import=github.com/apache/thrift/lib/go/thrift,skip_remote \
        -out "$out" "$src/$idl"
done
for pkg in standard simple_pre_lag simple_switch; do
    rm -rf "${here:?}/$pkg"
    cp -r "$out/$pkg" "$here/$pkg"
done
gofmt -w "$here"
