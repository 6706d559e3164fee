package acls

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// The rules of MirrorSourceConnector.shouldReplicateAcl and targetAclBinding.
func TestRules(t *testing.T) {
	allow, deny := kmsg.ACLPermissionTypeAllow, kmsg.ACLPermissionTypeDeny
	for _, tc := range []struct {
		perm       kmsg.ACLPermissionType
		op, wantOp kmsg.ACLOperation
		replicated bool
	}{
		{allow, kmsg.ACLOperationRead, kmsg.ACLOperationRead, true},
		{allow, kmsg.ACLOperationWrite, kmsg.ACLOperationWrite, false},
		{allow, kmsg.ACLOperationAll, kmsg.ACLOperationRead, true},
		{allow, kmsg.ACLOperationDescribe, kmsg.ACLOperationDescribe, true},
		{deny, kmsg.ACLOperationWrite, kmsg.ACLOperationWrite, true},
		{deny, kmsg.ACLOperationAll, kmsg.ACLOperationAll, true},
	} {
		b := Binding{Topic: "orders", Principal: "User:u", Host: "*", Operation: tc.op, Permission: tc.perm}
		if got := Replicated(b); got != tc.replicated {
			t.Errorf("%s: replicated %v, want %v", b, got, tc.replicated)
		}
		tb := Target(b, "A.orders")
		if tb.Topic != "A.orders" || tb.Operation != tc.wantOp || tb.Permission != tc.perm || tb.Principal != b.Principal || tb.Host != b.Host {
			t.Errorf("%s: target %s", b, tb)
		}
	}
}
