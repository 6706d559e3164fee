package check

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/mm2go/mm2go/deploy/internal/image"
)

// scaledJob is the part of a KEDA ScaledJob these checks read; TestManifestSchemas
// validates the whole object against KEDA's CRD.
type scaledJob struct {
	Spec struct {
		PollingInterval *int32          `json:"pollingInterval"`
		MaxReplicaCount *int32          `json:"maxReplicaCount"`
		JobTargetRef    json.RawMessage `json:"jobTargetRef"`
		Triggers        []struct {
			Type              string            `json:"type"`
			Name              string            `json:"name"`
			Metadata          map[string]string `json:"metadata"`
			AuthenticationRef *struct {
				Name string `json:"name"`
				Kind string `json:"kind"`
			} `json:"authenticationRef"`
		} `json:"triggers"`
	} `json:"spec"`
}

type triggerAuth struct {
	Spec struct {
		SecretTargetRef []struct {
			Parameter string `json:"parameter"`
			Name      string `json:"name"`
			Key       string `json:"key"`
		} `json:"secretTargetRef"`
		AzureKeyVault *struct {
			VaultURI    string `json:"vaultUri"`
			PodIdentity *struct {
				Provider   string `json:"provider"`
				IdentityID string `json:"identityId"`
			} `json:"podIdentity"`
			Secrets []struct {
				Parameter string `json:"parameter"`
				Name      string `json:"name"`
			} `json:"secrets"`
		} `json:"azureKeyVault"`
		PodIdentity *struct {
			Provider string `json:"provider"`
		} `json:"podIdentity"`
	} `json:"spec"`
}

func asType(t *testing.T, where string, obj map[string]any, v any) {
	t.Helper()
	raw, err := json.Marshal(obj)
	if err == nil {
		err = json.Unmarshal(raw, v)
	}
	if err != nil {
		t.Fatalf("%s: %v", where, err)
	}
}

// scaledJobPods returns the Job spec of every ScaledJob, decoded strictly into batch/v1.
func scaledJobPods(t *testing.T, dd *decoded) map[string]*batchv1.JobSpec {
	t.Helper()
	out := map[string]*batchv1.JobSpec{}
	for name, obj := range dd.custom["ScaledJob"] {
		var sj scaledJob
		asType(t, "ScaledJob "+name, obj, &sj)
		var js batchv1.JobSpec
		if err := strict(sj.Spec.JobTargetRef, &js); err != nil {
			t.Errorf("ScaledJob %s: jobTargetRef is not a batch/v1 JobSpec: %v", name, err)
			continue
		}
		out[name] = &js
	}
	return out
}

// kedaSASL maps mm2go's SASL mechanisms to the KEDA kafka scaler's names.
var kedaSASL = map[string]string{"": "none", "PLAIN": "plaintext", "SCRAM-SHA-256": "scram_sha256", "SCRAM-SHA-512": "scram_sha512"}

// checkScaledJobs checks the lag-driven mirror: a `mirror run` Job that KEDA's kafka scaler
// starts on the lag of the group the mirror commits to (MM2_LAG_GROUP), on the same cluster,
// signing in with a TriggerAuthentication whose secrets exist.
func checkScaledJobs(t *testing.T, dd *decoded, wantAuth string) {
	t.Helper()
	jobs := scaledJobPods(t, dd)
	if len(jobs) != 1 {
		t.Fatalf("%d ScaledJobs, want 1", len(jobs))
	}
	for name, js := range jobs {
		where := "ScaledJob " + name
		var sj scaledJob
		asType(t, where, dd.custom["ScaledJob"][name], &sj)
		ps := js.Template.Spec
		if ps.RestartPolicy != corev1.RestartPolicyNever {
			t.Errorf("%s: restartPolicy %q, want Never", where, ps.RestartPolicy)
		}
		if ps.SecurityContext == nil || ps.SecurityContext.RunAsUser == nil || *ps.SecurityContext.RunAsUser != image.UID {
			t.Errorf("%s: pod must run as %d", where, image.UID)
		}
		if ps.ServiceAccountName == "" || dd.accounts[ps.ServiceAccountName] == nil {
			t.Errorf("%s: serviceAccountName %q not defined", where, ps.ServiceAccountName)
		}
		if len(ps.Containers) != 1 {
			t.Fatalf("%s: %d containers", where, len(ps.Containers))
		}
		c := ps.Containers[0]
		if fn := checkFunctionContainer(t, where, c, "run"); fn != "mirror" {
			t.Errorf("%s: runs %q, want mirror", where, fn)
		}
		checkEnvRefs(t, where, c, dd)
		env := podEnv(t, where, c, dd)
		cfg := loadSettings(t, where, env)
		if cfg == nil {
			continue
		}
		if cfg.LagGroup == "" {
			t.Errorf("%s: MM2_LAG_GROUP is empty: the mirror commits nothing, so the scaler never sees the lag drop", where)
		}
		if cfg.BurstGroup == "" {
			t.Errorf("%s: MM2_BURST_GROUP is empty: the lag Job and the CronJob would copy the same partitions at once", where)
		}
		if sj.Spec.MaxReplicaCount == nil || *sj.Spec.MaxReplicaCount != 1 {
			t.Errorf("%s: maxReplicaCount %v, want 1", where, sj.Spec.MaxReplicaCount)
		}
		if js.BackoffLimit == nil || *js.BackoffLimit != 0 {
			t.Errorf("%s: backoffLimit must be 0 (the next poll starts a new Job)", where)
		}
		if js.ActiveDeadlineSeconds == nil || cfg.BurstMaxDuration <= 0 ||
			time.Duration(*js.ActiveDeadlineSeconds)*time.Second <= cfg.BurstMaxDuration {
			t.Errorf("%s: activeDeadlineSeconds %v must be set and above MM2_BURST_MAX_DURATION %v (a burst ends itself first)", where, js.ActiveDeadlineSeconds, cfg.BurstMaxDuration)
		}
		if len(sj.Spec.Triggers) != 1 || sj.Spec.Triggers[0].Type != "kafka" {
			t.Fatalf("%s: want one kafka trigger, got %+v", where, sj.Spec.Triggers)
		}
		tr := sj.Spec.Triggers[0]
		md := tr.Metadata
		// The scaler resolves *FromEnv from the Job container's environment (KEDA's
		// envSourceContainerName defaults to the first container).
		fromEnv := func(key, want string) string {
			if n := md[key+"FromEnv"]; n != "" {
				if n != want {
					t.Errorf("%s: %sFromEnv %q, want %s", where, key, n, want)
				}
				return env[n]
			}
			return md[key]
		}
		if got := fromEnv("bootstrapServers", "MM2_SOURCE_BOOTSTRAP_SERVERS"); got == "" || got != strings.Join(cfg.Source.BootstrapServers, ",") {
			t.Errorf("%s: scaler bootstrap servers %q, want the source's %v", where, got, cfg.Source.BootstrapServers)
		}
		if got := fromEnv("consumerGroup", "MM2_LAG_GROUP"); got != cfg.LagGroup {
			t.Errorf("%s: scaler group %q, want MM2_LAG_GROUP %q", where, got, cfg.LagGroup)
		}
		if md["offsetResetPolicy"] != "earliest" {
			t.Errorf("%s: offsetResetPolicy %q, want earliest (a topic never committed counts as lag)", where, md["offsetResetPolicy"])
		}
		if md["activationLagThreshold"] != "0" {
			t.Errorf("%s: activationLagThreshold %q, want 0 (one new record starts a Job)", where, md["activationLagThreshold"])
		}
		if tr.AuthenticationRef == nil || tr.AuthenticationRef.Name != wantAuth {
			t.Fatalf("%s: authenticationRef %+v, want %s", where, tr.AuthenticationRef, wantAuth)
		}
		ta := dd.custom["TriggerAuthentication"][tr.AuthenticationRef.Name]
		if ta == nil {
			t.Fatalf("%s: TriggerAuthentication %q is not defined", where, tr.AuthenticationRef.Name)
		}
		var auth triggerAuth
		asType(t, "TriggerAuthentication "+wantAuth, ta, &auth)
		params := map[string]bool{}
		for _, r := range auth.Spec.SecretTargetRef {
			params[r.Parameter] = true
			if s := dd.secrets[r.Name]; s == nil || s.StringData[r.Key] == "" {
				t.Errorf("TriggerAuthentication %s: %s from Secret %s key %s, which the Secret template lacks", wantAuth, r.Parameter, r.Name, r.Key)
			}
		}
		if kv := auth.Spec.AzureKeyVault; kv != nil {
			if kv.PodIdentity == nil || kv.PodIdentity.Provider != "azure-workload" {
				t.Errorf("TriggerAuthentication %s: Key Vault without podIdentity azure-workload", wantAuth)
			}
			for _, s := range kv.Secrets {
				params[s.Parameter] = true
			}
		}
		// The scaler's SASL and TLS must match what mm2go itself uses on the source, except
		// when the scaler signs in through Key Vault (Event Hubs: plaintext + connection string).
		sasl := md["sasl"]
		if auth.Spec.AzureKeyVault == nil {
			if want := kedaSASL[cfg.Source.SASLMechanism]; sasl != want {
				t.Errorf("%s: trigger sasl %q, want %q for MM2_SOURCE_SASL_MECHANISM %q", where, sasl, want, cfg.Source.SASLMechanism)
			}
		} else if sasl != "plaintext" && sasl != "scram_sha256" && sasl != "scram_sha512" {
			t.Errorf("%s: trigger sasl %q with Key Vault credentials", where, sasl)
		}
		if sasl != "none" && (!params["username"] || !params["password"]) {
			t.Errorf("%s: sasl %s needs username and password from %s (has %v)", where, sasl, wantAuth, keys(params))
		}
		wantTLS := "disable"
		if p := cfg.Source.SecurityProtocol; p == "SSL" || p == "SASL_SSL" || auth.Spec.AzureKeyVault != nil {
			wantTLS = "enable"
		}
		if md["tls"] != wantTLS {
			t.Errorf("%s: trigger tls %q, want %q (MM2_SOURCE_SECURITY_PROTOCOL %s)", where, md["tls"], wantTLS, cfg.Source.SecurityProtocol)
		}
	}
	// Every TriggerAuthentication offered is usable: SASL from a Secret, or Key Vault with
	// Azure workload identity.
	for name, obj := range dd.custom["TriggerAuthentication"] {
		var auth triggerAuth
		asType(t, "TriggerAuthentication "+name, obj, &auth)
		if len(auth.Spec.SecretTargetRef) == 0 && auth.Spec.AzureKeyVault == nil {
			t.Errorf("TriggerAuthentication %s: neither secretTargetRef nor azureKeyVault", name)
		}
	}
}

// TestKEDAKustomizeBuild renders deploy/keda (the KEDA overlay of deploy/kubernetes) and checks
// the CronJobs as before plus the lag-driven ScaledJob and both TriggerAuthentications.
func TestKEDAKustomizeBuild(t *testing.T) {
	rendered := kustomizeBuild(t, "deploy/keda")
	dd := decodeAll(t, rendered)
	for _, d := range readDocs(t, "deploy/kubernetes/secret.example.yaml", mustRead(t, "deploy/kubernetes/secret.example.yaml")) {
		if err := dd.decodeDoc(d); err != nil {
			t.Fatal(err)
		}
	}
	checkKubernetes(t, dd)
	checkScaledJobs(t, dd, "mm2go-source-kafka")
	if len(dd.custom["TriggerAuthentication"]) != 2 || dd.custom["TriggerAuthentication"]["mm2go-source-azure"] == nil {
		t.Errorf("TriggerAuthentications %v, want mm2go-source-kafka and mm2go-source-azure", keys(dd.custom["TriggerAuthentication"]))
	}
	for name, js := range scaledJobPods(t, dd) {
		if img := js.Template.Spec.Containers[0].Image; img != "registry.example.com/mm2go:0.1.0" {
			t.Errorf("ScaledJob %s: image %q after kustomize", name, img)
		}
	}
	for _, kind := range []string{"ScaledJob", "TriggerAuthentication"} {
		for name, obj := range dd.custom[kind] {
			if ns := fmt.Sprint(nested(obj, "metadata", "namespace")); ns != testNamespace {
				t.Errorf("%s %s: namespace %q after kustomize", kind, name, ns)
			}
		}
	}
	// Switching the scaler to Azure workload identity is the documented one-line change.
	for _, obj := range dd.custom["ScaledJob"] {
		tr := nested(obj, "spec", "triggers").([]any)[0].(map[string]any)
		tr["authenticationRef"] = map[string]any{"name": "mm2go-source-azure"}
		tr["metadata"].(map[string]any)["sasl"] = "plaintext"
	}
	checkScaledJobs(t, dd, "mm2go-source-azure")
}
