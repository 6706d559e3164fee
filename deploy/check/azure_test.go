package check

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/appcontainers/armappcontainers/v3"
	"github.com/robfig/cron/v3"

	"github.com/mm2go/mm2go/deploy/internal/armeval"
	"github.com/mm2go/mm2go/deploy/internal/image"
)

// jobsAPIVersion is the Microsoft.App API version of the armappcontainers/v3 models used here.
const jobsAPIVersion = "2025-01-01"

var armCtx = armeval.Context{
	SubscriptionID: "00000000-0000-0000-0000-000000000000", ResourceGroup: "mm2go-rg", Location: "westeurope",
	// What ARM reads from the identity the template creates (parameters file: identityName mm2go-id).
	References: map[string]map[string]any{
		"/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/mm2go-rg/providers/Microsoft.ManagedIdentity/userAssignedIdentities/mm2go-id": {
			"clientId": testIdentityClientID, "principalId": testIdentityPrincipalID, "tenantId": "33333333-3333-3333-3333-333333333333",
		},
	},
}

const (
	testIdentityClientID    = "11111111-1111-1111-1111-111111111111"
	testIdentityPrincipalID = "22222222-2222-2222-2222-222222222222"
)

// armJob is one evaluated Microsoft.App/jobs resource of the template.
type armJob struct {
	name      string
	condition bool
	dependsOn []string
	raw       map[string]any // the evaluated resource without ARM-only keys
	job       armappcontainers.Job
}

// armResource is one evaluated resource of another type (identity, role assignments).
type armResource struct {
	name      string
	condition bool
	raw       map[string]any
}

func loadJSON(t *testing.T, rel string) map[string]any {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot(t), rel))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatalf("%s: %v", rel, err)
	}
	return m
}

// evalTemplate evaluates deploy/azure/azuredeploy.json with its parameters file, with
// overrides applied on top, and decodes every job strictly into armappcontainers.Job.
func evalTemplate(t *testing.T, overrides map[string]any) (*armeval.Template, []armJob) {
	t.Helper()
	tp, jobs, _ := evalTemplateAll(t, overrides)
	return tp, jobs
}

// evalTemplateAll is evalTemplate that also returns the other resources, by type.
func evalTemplateAll(t *testing.T, overrides map[string]any) (*armeval.Template, []armJob, map[string][]armResource) {
	t.Helper()
	others := map[string][]armResource{}
	tmpl := loadJSON(t, "deploy/azure/azuredeploy.json")
	pf := loadJSON(t, "deploy/azure/azuredeploy.parameters.json")
	for _, k := range []string{"$schema", "contentVersion", "parameters"} {
		if _, ok := pf[k]; !ok {
			t.Errorf("parameters file: no %q", k)
		}
	}
	params, _ := pf["parameters"].(map[string]any)
	for k, v := range overrides {
		params[k] = map[string]any{"value": v}
	}
	for k := range tmpl {
		switch k {
		case "$schema", "contentVersion", "metadata", "parameters", "variables", "resources", "outputs":
		default:
			t.Errorf("template: unexpected top-level key %q", k)
		}
	}
	tp, err := armeval.New(tmpl, params, armCtx)
	if err != nil {
		t.Fatalf("template parameters: %v", err)
	}
	resources, _ := tmpl["resources"].([]any)
	var jobs []armJob
	for i, r := range resources {
		ev, err := tp.Eval(r)
		if err != nil {
			t.Fatalf("resource %d: %v", i, err)
		}
		res := ev.(map[string]any)
		where := fmt.Sprintf("resource %d (%v)", i, res["name"])
		cond := true
		if c, ok := res["condition"]; ok {
			b, isBool := c.(bool)
			if !isBool {
				t.Errorf("%s: condition is %T", where, c)
			}
			cond = b
		}
		switch res["type"] {
		case "Microsoft.App/jobs":
		case "Microsoft.ManagedIdentity/userAssignedIdentities", "Microsoft.Authorization/roleAssignments":
			typ := res["type"].(string)
			others[typ] = append(others[typ], armResource{name: fmt.Sprint(res["name"]), condition: cond, raw: res})
			continue
		default:
			t.Errorf("%s: type %v not expected", where, res["type"])
			continue
		}
		if res["apiVersion"] != jobsAPIVersion {
			t.Errorf("%s: apiVersion %v, want %s (the API version of the armappcontainers/v3 models the test decodes with)", where, res["apiVersion"], jobsAPIVersion)
		}
		j := armJob{name: fmt.Sprint(res["name"]), condition: cond}
		deps, _ := res["dependsOn"].([]any)
		for _, d := range deps {
			j.dependsOn = append(j.dependsOn, fmt.Sprint(d))
		}
		for _, k := range []string{"apiVersion", "comments", "condition", "dependsOn"} {
			delete(res, k)
		}
		j.raw = res
		if err := strictSDK(res, &j.job); err != nil {
			t.Errorf("%s: not a valid armappcontainers.Job: %v", where, err)
		}
		jobs = append(jobs, j)
	}
	if outs, ok := tmpl["outputs"]; ok {
		if _, err := tp.Eval(outs); err != nil {
			t.Errorf("outputs: %v", err)
		}
	}
	return tp, jobs, others
}

// strictSDK decodes v into an Azure SDK model and fails if anything in v was not taken: the
// SDK's generated UnmarshalJSON ignores unknown keys, so the model is marshalled back and
// every input value must reappear at the same path.
func strictSDK(v map[string]any, model any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(raw, model); err != nil {
		return err
	}
	back, err := json.Marshal(model)
	if err != nil {
		return err
	}
	var got any
	if err := json.Unmarshal(back, &got); err != nil {
		return err
	}
	var want any
	_ = json.Unmarshal(raw, &want)
	if diffs := jsonDiff("", want, got); len(diffs) > 0 {
		return fmt.Errorf("not taken by the model (unknown field, wrong type or place): %s", strings.Join(diffs, "; "))
	}
	return nil
}

// jsonDiff lists the paths where want has a value that got lacks or differs from.
func jsonDiff(path string, want, got any) []string {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return []string{path + " (object lost)"}
		}
		var out []string
		ks := keys(w)
		for _, k := range ks {
			gv, present := g[k]
			if !present {
				out = append(out, path+"."+k)
				continue
			}
			out = append(out, jsonDiff(path+"."+k, w[k], gv)...)
		}
		return out
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return []string{path + " (array changed)"}
		}
		var out []string
		for i := range w {
			out = append(out, jsonDiff(fmt.Sprintf("%s[%d]", path, i), w[i], g[i])...)
		}
		return out
	}
	if !reflect.DeepEqual(want, got) {
		return []string{fmt.Sprintf("%s (%v became %v)", path, want, got)}
	}
	return nil
}

func TestAzureTemplate(t *testing.T) {
	tp, jobs := evalTemplate(t, nil)
	identityID, _ := tp.Eval("[resourceId('Microsoft.ManagedIdentity/userAssignedIdentities', parameters('identityName'))]")
	imageRef, _ := tp.Parameter("image")

	want := map[string]string{"mm2go-mirror": "mirror", "mm2go-checkpoint": "checkpoint", "mm2go-heartbeat": "heartbeat", "mm2go-mirror-lag": "mirror"}
	seen := map[string]bool{}
	for _, j := range jobs {
		where := "job " + j.name
		seen[j.name] = true
		fn, known := want[j.name]
		if !known {
			t.Errorf("%s: unexpected job", where)
		}
		job := j.job
		if job.Location == nil || *job.Location == "" {
			t.Errorf("%s: no location", where)
		}
		// Identity: user-assigned, the one the Key Vault references use.
		if job.Identity == nil || job.Identity.Type == nil || *job.Identity.Type != armappcontainers.ManagedServiceIdentityTypeUserAssigned {
			t.Errorf("%s: identity must be UserAssigned", where)
		} else if _, ok := job.Identity.UserAssignedIdentities[identityID.(string)]; !ok || len(job.Identity.UserAssignedIdentities) != 1 {
			t.Errorf("%s: userAssignedIdentities %v, want exactly %s", where, keys(job.Identity.UserAssignedIdentities), identityID)
		}
		if job.Properties == nil || job.Properties.Configuration == nil || job.Properties.Template == nil || job.Properties.EnvironmentID == nil {
			t.Fatalf("%s: properties.environmentId, configuration and template are required", where)
		}
		cfg := job.Properties.Configuration
		if cfg.TriggerType == nil || !oneOf(*cfg.TriggerType, armappcontainers.PossibleTriggerTypeValues()) {
			t.Errorf("%s: triggerType %v not one of %v", where, cfg.TriggerType, armappcontainers.PossibleTriggerTypeValues())
			continue
		}
		if cfg.ReplicaTimeout == nil || *cfg.ReplicaTimeout <= 0 {
			t.Errorf("%s: replicaTimeout is required", where)
			continue
		}
		timeout := time.Duration(*cfg.ReplicaTimeout) * time.Second
		if timeout < acaColdStart {
			t.Errorf("%s: replicaTimeout %v leaves no room for a cold start (%v: pulling the image on a new node, then the run)", where, timeout, acaColdStart)
		}
		if cfg.ReplicaRetryLimit == nil || *cfg.ReplicaRetryLimit != 0 {
			t.Errorf("%s: replicaRetryLimit must be 0: a retried replica could overlap the next run; the next run catches up", where)
		}
		switch *cfg.TriggerType {
		case armappcontainers.TriggerTypeSchedule:
			sc := cfg.ScheduleTriggerConfig
			if sc == nil || sc.CronExpression == nil {
				t.Errorf("%s: scheduleTriggerConfig.cronExpression required", where)
				break
			}
			s, err := cron.ParseStandard(*sc.CronExpression)
			if err != nil {
				t.Errorf("%s: cronExpression %q: %v", where, *sc.CronExpression, err)
				break
			}
			t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			if iv := s.Next(s.Next(t0)).Sub(s.Next(t0)); timeout >= iv {
				t.Errorf("%s: replicaTimeout %v not below the schedule interval %v: runs could overlap", where, timeout, iv)
			}
			if sc.Parallelism == nil || *sc.Parallelism != 1 {
				t.Errorf("%s: parallelism must be 1", where)
			}
		case armappcontainers.TriggerTypeEvent:
			checkEventTrigger(t, where, cfg)
		default:
			t.Errorf("%s: trigger %s not expected", where, *cfg.TriggerType)
		}
		// Secrets: Key Vault references through the user-assigned identity only.
		secrets := map[string]bool{}
		for _, s := range cfg.Secrets {
			if s.Name == nil {
				t.Errorf("%s: secret without name", where)
				continue
			}
			secrets[*s.Name] = true
			if s.Value != nil {
				t.Errorf("%s: secret %s has an inline value; use a Key Vault reference", where, *s.Name)
			}
			if s.KeyVaultURL == nil || !strings.HasPrefix(*s.KeyVaultURL, "https://") || !strings.Contains(*s.KeyVaultURL, "/secrets/") {
				t.Errorf("%s: secret %s: keyVaultUrl %v is not https://<vault>/secrets/<name>", where, *s.Name, s.KeyVaultURL)
			}
			if s.Identity == nil || *s.Identity != identityID {
				t.Errorf("%s: secret %s: identity %v, want the user-assigned identity", where, *s.Name, s.Identity)
			}
		}
		for _, r := range cfg.Registries {
			if r.Identity == nil || *r.Identity != identityID || r.PasswordSecretRef != nil {
				t.Errorf("%s: registry %v must be pulled with the user-assigned identity", where, r.Server)
			}
		}
		if rules := eventRules(cfg); rules != nil {
			for _, r := range rules {
				for _, a := range r.Auth {
					if a.SecretRef == nil || !secrets[*a.SecretRef] {
						t.Errorf("%s: scale rule %v auth refers to undefined secret %v", where, r.Name, a.SecretRef)
					}
				}
			}
		}
		// The container: the function binary with `run`.
		cs := job.Properties.Template.Containers
		if len(cs) != 1 {
			t.Fatalf("%s: %d containers, want 1", where, len(cs))
		}
		c := cs[0]
		if c.Image == nil || *c.Image != imageRef {
			t.Errorf("%s: image %v, want the image parameter", where, c.Image)
		}
		if len(c.Command) != 1 || *c.Command[0] != image.BinDir+"/"+fn {
			t.Errorf("%s: command %v, want [%s/%s]", where, derefs(c.Command), image.BinDir, fn)
		}
		if len(c.Args) != 1 || *c.Args[0] != "run" {
			t.Errorf("%s: args %v, want [run]", where, derefs(c.Args))
		}
		if c.Resources == nil || c.Resources.CPU == nil || c.Resources.Memory == nil {
			t.Errorf("%s: resources.cpu and memory required", where)
		}
		for _, e := range c.Env {
			if (e.Value == nil) == (e.SecretRef == nil) {
				t.Errorf("%s: env %v needs exactly one of value and secretRef", where, e.Name)
			}
			if e.SecretRef != nil && !secrets[*e.SecretRef] {
				t.Errorf("%s: env %s refers to undefined secret %s", where, *e.Name, *e.SecretRef)
			}
		}
	}
	for name := range want {
		if !seen[name] {
			t.Errorf("job %s missing", name)
		}
	}

	// Every declared parameter and variable is used (no dead knobs).
	tmpl := loadJSON(t, "deploy/azure/azuredeploy.json")
	for name := range tmpl["parameters"].(map[string]any) {
		if !tp.UsedParameters[name] {
			t.Errorf("parameter %q is declared but never used", name)
		}
	}
	for name := range tmpl["variables"].(map[string]any) {
		if !tp.UsedVariables[name] {
			t.Errorf("variable %q is declared but never used", name)
		}
	}
}

func TestAzureTemplateVariants(t *testing.T) {
	// Public image (no registry) and the lag-driven job switched on.
	_, jobs := evalTemplate(t, map[string]any{"registryServer": "", "deployEventJob": true})
	for _, j := range jobs {
		if n := len(j.job.Properties.Configuration.Registries); n != 0 {
			t.Errorf("job %s: %d registries with registryServer empty", j.name, n)
		}
		if !j.condition {
			t.Errorf("job %s: not deployed with deployEventJob=true", j.name)
		}
	}
	_, jobs = evalTemplate(t, nil)
	for _, j := range jobs {
		if j.name == "mm2go-mirror-lag" && j.condition {
			t.Error("the lag-driven job is deployed by default; it needs a consumer group mm2go does not commit yet (README)")
		}
		if len(j.job.Properties.Configuration.Registries) != 1 {
			t.Errorf("job %s: want the registry of the parameters file", j.name)
		}
	}
}

// kedaKafkaMetadata are the KEDA `kafka` scaler metadata keys (shared/docs/triggers.md §4.1).
var kedaKafkaMetadata = map[string]bool{
	"bootstrapServers": true, "consumerGroup": true, "topic": true, "lagThreshold": true, "activationLagThreshold": true,
	"offsetResetPolicy": true, "allowIdleConsumers": true, "excludePersistentLag": true, "scaleToZeroOnInvalidOffset": true,
	"limitToPartitionsWithLag": true, "ensureEvenDistributionOfPartitions": true, "partitionLimitation": true, "version": true,
	"tls": true, "sasl": true, "unsafeSsl": true,
}

func eventRules(cfg *armappcontainers.JobConfiguration) []*armappcontainers.JobScaleRule {
	if cfg.EventTriggerConfig == nil || cfg.EventTriggerConfig.Scale == nil {
		return nil
	}
	return cfg.EventTriggerConfig.Scale.Rules
}

func checkEventTrigger(t *testing.T, where string, cfg *armappcontainers.JobConfiguration) {
	t.Helper()
	et := cfg.EventTriggerConfig
	if et == nil || et.Scale == nil {
		t.Errorf("%s: eventTriggerConfig.scale required", where)
		return
	}
	if et.Scale.MaxExecutions == nil || *et.Scale.MaxExecutions != 1 {
		t.Errorf("%s: maxExecutions must be 1: executions share the partitions", where)
	}
	if len(et.Scale.Rules) != 1 {
		t.Fatalf("%s: want one scale rule", where)
	}
	r := et.Scale.Rules[0]
	if r.Type == nil || *r.Type != "kafka" {
		t.Errorf("%s: scale rule type %v, want kafka", where, r.Type)
	}
	md, ok := r.Metadata.(map[string]any)
	if !ok {
		t.Fatalf("%s: scale rule metadata is %T", where, r.Metadata)
	}
	for _, k := range []string{"bootstrapServers", "consumerGroup", "lagThreshold"} {
		if md[k] == nil || md[k] == "" {
			t.Errorf("%s: scale metadata %s required", where, k)
		}
	}
	for k, v := range md {
		if !kedaKafkaMetadata[k] {
			t.Errorf("%s: %q is not a KEDA kafka scaler parameter", where, k)
		}
		if _, isString := v.(string); !isString {
			t.Errorf("%s: scale metadata %s must be a string, is %T", where, k, v)
		}
	}
	params := map[string]bool{}
	for _, a := range r.Auth {
		if a.TriggerParameter != nil {
			params[*a.TriggerParameter] = true
		}
	}
	if md["sasl"] != nil && md["sasl"] != "none" && (!params["username"] || !params["password"]) {
		t.Errorf("%s: sasl %v needs username and password auth", where, md["sasl"])
	}
}

func oneOf[T comparable](v T, all []T) bool {
	for _, a := range all {
		if a == v {
			return true
		}
	}
	return false
}

func derefs(ps []*string) []string {
	out := make([]string, 0, len(ps))
	for _, p := range ps {
		if p != nil {
			out = append(out, *p)
		}
	}
	sort.Strings(out)
	return out
}

// acaColdStart is the least replicaTimeout a job gets: a replica on a node without the image
// pulls it first (tens of seconds for a registry in another region), and the timeout counts
// from the replica's start, the pull included.
const acaColdStart = 45 * time.Second

// armEnv is a job's container environment with Key Vault secrets replaced by example values.
func armEnv(t *testing.T, j armJob) map[string]string {
	t.Helper()
	secretValues := map[string]string{
		"source-sasl-username":               "mm2go",
		"source-sasl-password":               "not-a-real-password",
		"target-sasl-username":               "mm2go",
		"target-sasl-password":               "not-a-real-password",
		"target-eventhubs-connection-string": "Endpoint=sb://mm2go-example.servicebus.windows.net/;SharedAccessKeyName=mm2go;SharedAccessKey=bm90LWEta2V5",
	}
	env := map[string]string{}
	for _, e := range j.job.Properties.Template.Containers[0].Env {
		switch {
		case e.Value != nil:
			env[*e.Name] = *e.Value
		case e.SecretRef != nil:
			v, ok := secretValues[*e.SecretRef]
			if !ok {
				t.Errorf("job %s: no example value for secret %s", j.name, *e.SecretRef)
			}
			env[*e.Name] = v
		}
	}
	return env
}

// TestAzureMirrorJobsSplitPartitions: with deployEventJob=true the scheduled mirror and the
// lag-driven one can run at the same moment (a lag execution still going when the schedule
// fires, or the other way round). Both then must be members of one burst group, which splits
// the partitions between them; without it each takes every partition: duplicates, and under
// MM2_EXACTLY_ONCE they fence each other's transactions.
func TestAzureMirrorJobsSplitPartitions(t *testing.T) {
	_, jobs := evalTemplate(t, map[string]any{"deployEventJob": true})
	groups := map[string]string{}
	for _, j := range jobs {
		if !j.condition || *j.job.Properties.Template.Containers[0].Name != "mirror" {
			continue
		}
		cfg := loadSettings(t, "job "+j.name, armEnv(t, j))
		if cfg == nil {
			continue
		}
		if cfg.BurstGroup == "" {
			t.Errorf("job %s: MM2_BURST_GROUP empty: it copies every partition even while the other mirror job runs", j.name)
		}
		if cfg.LagGroup == "" {
			t.Errorf("job %s: MM2_LAG_GROUP empty: the lag job's scaler would never see the lag drop", j.name)
		}
		groups[j.name] = cfg.BurstGroup
	}
	if len(groups) != 2 {
		t.Fatalf("mirror jobs deployed: %v, want mm2go-mirror and mm2go-mirror-lag", groups)
	}
	if groups["mm2go-mirror"] != groups["mm2go-mirror-lag"] {
		t.Errorf("burst groups %v: the two mirror jobs must share one", groups)
	}
}

// TestAzureTargetAuth: each targetAuth gives the functions settings they accept, with the target
// signing in the way it says, and Key Vault references only to the secrets that way needs (a
// reference to a secret the vault lacks fails the deployment).
func TestAzureTargetAuth(t *testing.T) {
	cases := []struct {
		auth      string
		overrides map[string]any
		secrets   []string
		check     func(t *testing.T, where string, env map[string]string)
	}{
		{auth: "eventhubs-connection-string", secrets: []string{"source-sasl-password", "source-sasl-username", "target-eventhubs-connection-string"},
			check: func(t *testing.T, where string, env map[string]string) {
				if env["MM2_TARGET_EVENTHUBS_CONNECTION_STRING"] == "" {
					t.Errorf("%s: no connection string", where)
				}
			}},
		{auth: "sasl", overrides: map[string]any{"targetBootstrapServers": "kafka-a.example.net:9093", "targetSaslMechanism": "SCRAM-SHA-256"},
			secrets: []string{"source-sasl-password", "source-sasl-username", "target-sasl-password", "target-sasl-username"},
			check: func(t *testing.T, where string, env map[string]string) {
				cfg := loadSettings(t, where, env)
				if cfg == nil {
					return
				}
				if got := strings.Join(cfg.Target.BootstrapServers, ","); got != "kafka-a.example.net:9093" {
					t.Errorf("%s: target bootstrap %q", where, got)
				}
				if cfg.Target.SASLMechanism != "SCRAM-SHA-256" || cfg.Target.SecurityProtocol != "SASL_SSL" {
					t.Errorf("%s: target SASL %s over %s, want SCRAM-SHA-256 over SASL_SSL", where, cfg.Target.SASLMechanism, cfg.Target.SecurityProtocol)
				}
				if env["MM2_TARGET_EVENTHUBS_CONNECTION_STRING"] != "" {
					t.Errorf("%s: connection string set beside SASL", where)
				}
			}},
		{auth: "managed-identity", overrides: map[string]any{"targetBootstrapServers": "mm2go-example.servicebus.windows.net:9093"},
			secrets: []string{"source-sasl-password", "source-sasl-username"},
			check: func(t *testing.T, where string, env map[string]string) {
				cfg := loadSettings(t, where, env)
				if cfg == nil {
					return
				}
				if cfg.Target.Azure.Auth != "managed-identity" || cfg.Target.Azure.ClientID != testIdentityClientID {
					t.Errorf("%s: target Azure AD %q client %q, want managed-identity with the template identity's clientId %s", where, cfg.Target.Azure.Auth, cfg.Target.Azure.ClientID, testIdentityClientID)
				}
			}},
	}
	for _, c := range cases {
		t.Run(c.auth, func(t *testing.T) {
			ov := map[string]any{"targetAuth": c.auth}
			for k, v := range c.overrides {
				ov[k] = v
			}
			_, jobs := evalTemplate(t, ov)
			for _, j := range jobs {
				where := "job " + j.name
				env := armEnv(t, j)
				loadSettings(t, where, env)
				c.check(t, where, env)
				var names []string
				for _, s := range j.job.Properties.Configuration.Secrets {
					names = append(names, *s.Name)
				}
				sort.Strings(names)
				if strings.Join(names, ",") != strings.Join(c.secrets, ",") {
					t.Errorf("%s: Key Vault secrets %v, want %v", where, names, c.secrets)
				}
			}
		})
	}
}

// TestAzureIdentityAndRoles: the template creates the jobs' user-assigned identity and gives it
// what the jobs use it for: Key Vault Secrets User on the vault (Key Vault references) and
// AcrPull on the registry (image pulls); every job waits for them.
func TestAzureIdentityAndRoles(t *testing.T) {
	const (
		kvSecretsUser = "4633458b-17de-408a-b874-0445c86b69e6"
		acrPull       = "7f951dda-4ed3-4680-a7ca-43fe172d538d"
	)
	tp, jobs, others := evalTemplateAll(t, nil)
	identityID, _ := tp.Eval("[resourceId('Microsoft.ManagedIdentity/userAssignedIdentities', parameters('identityName'))]")
	ids := others["Microsoft.ManagedIdentity/userAssignedIdentities"]
	if len(ids) != 1 || ids[0].name != "mm2go-id" || !ids[0].condition {
		t.Fatalf("identities %+v, want one named identityName (mm2go-id)", ids)
	}
	if ids[0].raw["location"] == nil || ids[0].raw["apiVersion"] == nil {
		t.Errorf("identity: location and apiVersion required")
	}
	wantScope := map[string]string{
		kvSecretsUser: "Microsoft.KeyVault/vaults/mm2go-kv",
		acrPull:       "Microsoft.ContainerRegistry/registries/mm2goregistry",
	}
	roleNames := map[string]string{}
	for _, ra := range others["Microsoft.Authorization/roleAssignments"] {
		props, _ := ra.raw["properties"].(map[string]any)
		role := fmt.Sprint(props["roleDefinitionId"])
		want := "/subscriptions/" + armCtx.SubscriptionID + "/providers/Microsoft.Authorization/roleDefinitions/"
		short := strings.TrimPrefix(role, want)
		scope, ok := wantScope[short]
		if !ok || !strings.HasPrefix(role, want) {
			t.Errorf("role assignment %s: role %s, want Key Vault Secrets User or AcrPull", ra.name, role)
			continue
		}
		roleNames[short] = ra.name
		if !ra.condition {
			t.Errorf("role assignment %s: not deployed with the parameters file", ra.name)
		}
		if ra.raw["scope"] != scope {
			t.Errorf("role assignment %s: scope %v, want %s", ra.name, ra.raw["scope"], scope)
		}
		if props["principalId"] != testIdentityPrincipalID || props["principalType"] != "ServicePrincipal" {
			t.Errorf("role assignment %s: principal %v (%v), want the identity's principalId as ServicePrincipal", ra.name, props["principalId"], props["principalType"])
		}
		if _, err := uuid(ra.name); err != nil {
			t.Errorf("role assignment %s: name must be a GUID: %v", ra.name, err)
		}
	}
	if len(roleNames) != 2 {
		t.Fatalf("role assignments for %v, want Key Vault Secrets User and AcrPull", keys(roleNames))
	}
	for _, j := range jobs {
		deps := map[string]bool{}
		for _, d := range j.dependsOn {
			deps[d] = true
		}
		for _, need := range []string{identityID.(string), roleNames[kvSecretsUser], roleNames[acrPull]} {
			if !deps[need] {
				t.Errorf("job %s: dependsOn %v lacks %s (the job would start before it can read Key Vault or pull)", j.name, j.dependsOn, need)
			}
		}
	}
	// A public image needs no AcrPull; assignRoles=false leaves both to the user.
	_, _, others = evalTemplateAll(t, map[string]any{"registryServer": ""})
	for _, ra := range others["Microsoft.Authorization/roleAssignments"] {
		if ra.name == roleNames[acrPull] && ra.condition {
			t.Errorf("AcrPull assigned with registryServer empty")
		}
	}
	_, _, others = evalTemplateAll(t, map[string]any{"assignRoles": false})
	for _, ra := range others["Microsoft.Authorization/roleAssignments"] {
		if ra.condition {
			t.Errorf("role assignment %s deployed with assignRoles=false", ra.name)
		}
	}
}

// uuid checks the 8-4-4-4-12 hex form.
func uuid(s string) (string, error) {
	parts := strings.Split(s, "-")
	lens := []int{8, 4, 4, 4, 12}
	if len(parts) != len(lens) {
		return "", fmt.Errorf("%q is not 8-4-4-4-12 hex", s)
	}
	for i, p := range parts {
		if len(p) != lens[i] || strings.Trim(p, "0123456789abcdef") != "" {
			return "", fmt.Errorf("%q is not 8-4-4-4-12 hex", s)
		}
	}
	return s, nil
}
