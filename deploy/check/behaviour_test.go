package check

import (
	"strings"
	"testing"
)

// Checks of what the platforms do with the manifests, beyond their schemas: each rule is a
// behaviour that a schema-valid manifest can still get wrong.

// TestKEDABehaviour: editing the ScaledJob (a new image, resources) must not stop a running
// burst, and the Key Vault TriggerAuthentication must not name an identity that does not exist.
func TestKEDABehaviour(t *testing.T) {
	dd := decodeAll(t, kustomizeBuild(t, "deploy/keda"))
	if len(dd.custom["ScaledJob"]) == 0 {
		t.Fatal("no ScaledJob in deploy/keda")
	}
	for name, sj := range dd.custom["ScaledJob"] {
		// KEDA's default rollout (immediate) deletes the Jobs of a ScaledJob when it changes;
		// gradual leaves them to finish and applies the change to the next Jobs.
		if got := nested(sj, "spec", "rollout", "strategy"); got != "gradual" {
			t.Errorf("ScaledJob %s: rollout.strategy %v, want gradual (an edit would kill a running burst)", name, got)
		}
		if nested(sj, "spec", "rolloutStrategy") != nil {
			t.Errorf("ScaledJob %s: rolloutStrategy is deprecated; use rollout.strategy", name)
		}
	}
	for name, ta := range dd.custom["TriggerAuthentication"] {
		for _, path := range [][]string{{"spec", "podIdentity"}, {"spec", "azureKeyVault", "podIdentity"}} {
			id, ok := nested(ta, append(path, "identityId")...).(string)
			if !ok {
				continue
			}
			// The nil GUID names no identity: KEDA then asks Entra ID for a client that does not
			// exist instead of using its own identity, which is what leaving the field out does.
			if strings.Trim(id, "0-") == "" {
				t.Errorf("TriggerAuthentication %s: %s.identityId %q is a placeholder; leave it out for KEDA's own identity", name, strings.Join(path, "."), id)
			}
		}
	}
}
