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

var armCtx = armeval.Context{SubscriptionID: "00000000-0000-0000-0000-000000000000", ResourceGroup: "mm2go-rg", Location: "westeurope"}

// armJob is one evaluated Microsoft.App/jobs resource of the template.
type armJob struct {
	name      string
	condition bool
	raw       map[string]any // the evaluated resource without ARM-only keys
	job       armappcontainers.Job
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
		if res["type"] != "Microsoft.App/jobs" {
			t.Errorf("%s: type %v; only Microsoft.App/jobs expected", where, res["type"])
			continue
		}
		if res["apiVersion"] != jobsAPIVersion {
			t.Errorf("%s: apiVersion %v, want %s (the API version of the armappcontainers/v3 models the test decodes with)", where, res["apiVersion"], jobsAPIVersion)
		}
		j := armJob{name: fmt.Sprint(res["name"]), condition: true}
		if c, ok := res["condition"]; ok {
			b, isBool := c.(bool)
			if !isBool {
				t.Errorf("%s: condition is %T", where, c)
			}
			j.condition = b
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
	return tp, jobs
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
