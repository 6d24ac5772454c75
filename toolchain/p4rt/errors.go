package p4rt

import (
	"errors"
	"fmt"

	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/anypb"
)

// codedError is an error carrying the canonical gRPC code the spec assigns
// to it, so that each update of a batch reports its own code (spec §12.3).
type codedError struct {
	code codes.Code
	msg  string
}

func (e *codedError) Error() string { return e.code.String() + ": " + e.msg }

func errorf(code codes.Code, format string, args ...any) error {
	return &codedError{code: code, msg: fmt.Sprintf(format, args...)}
}

// codeOf extracts the canonical code of an error; errors that did not come
// from the spec's rules (engine failures) are INTERNAL unless the engine
// said otherwise through a codedError.
func codeOf(err error) codes.Code {
	if err == nil {
		return codes.OK
	}
	var ce *codedError
	if errors.As(err, &ce) {
		return ce.code
	}
	if s, ok := grpcstatus.FromError(err); ok {
		return s.Code()
	}
	return codes.Internal
}

func messageOf(err error) string {
	var ce *codedError
	if errors.As(err, &ce) {
		return ce.msg
	}
	return err.Error()
}

// rpcError turns a request-wide failure into a gRPC status without details
// (spec §12.3 item 2).
func rpcError(err error) error {
	return grpcstatus.Error(codeOf(err), messageOf(err))
}

// batchError builds the status for a batch where at least one element
// failed: UNKNOWN at the top, one p4.v1.Error per element, in order, OK for
// the elements that succeeded (spec §12.3 item 3, §13.4).
func batchError(what string, errs []error) error {
	failed := 0
	st := &status.Status{Code: int32(codes.Unknown)}
	for _, err := range errs {
		detail := &p4v1.Error{CanonicalCode: int32(codes.OK)}
		if err != nil {
			failed++
			detail.CanonicalCode = int32(codeOf(err))
			detail.Message = messageOf(err)
		}
		a, aerr := anypb.New(detail)
		if aerr != nil {
			return grpcstatus.Error(codes.Internal, aerr.Error())
		}
		st.Details = append(st.Details, a)
	}
	if failed == 0 {
		return nil
	}
	st.Message = fmt.Sprintf("%s failure: %d of %d failed", what, failed, len(errs))
	if failed == 1 {
		for _, err := range errs {
			if err != nil {
				st.Message = fmt.Sprintf("%s failure: %s", what, messageOf(err))
			}
		}
	}
	return grpcstatus.ErrorProto(st)
}
