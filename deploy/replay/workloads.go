package replay

import (
	"encoding/json"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/mm2go/mm2go/deploy/internal/armeval"
)

// Trigger kinds.
const (
	// TriggerCron starts a run on a cron schedule (CronJob, Container Apps schedule job).
	TriggerCron = "cron"
	// TriggerLag starts a run when a consumer group's lag is above a threshold (KEDA
	// ScaledJob, Container Apps event job with the kafka scaler).
	TriggerLag = "lag"
)

// Workload is one thing a platform starts, derived from a shipped artifact.
type Workload struct {
	Shape    string // kubernetes, keda, aca
	Name     string // object name (CronJob, ScaledJob, Container Apps job)
	Function string // mirror, checkpoint, heartbeat (the command's base name)
	Args     []string
	Env      map[string]string
	Trigger  Trigger
	// MaxRunning is how many runs the platform lets overlap (CronJob Forbid, maxReplicaCount,
	// maxExecutions): 1 for every shipped workload.
	MaxRunning int
	// Deadline is when the platform stops a run (activeDeadlineSeconds, replicaTimeout).
	Deadline time.Duration
	// RetryLimit is how often the platform starts a failed run's pod again before it calls
	// the execution failed (a Job's backoffLimit, default 6; replicaRetryLimit).
	RetryLimit int
	// GracefulRollout is true when editing the workload leaves its running runs alone
	// (ScaledJob rollout.strategy gradual; CronJobs and Container Apps jobs always do).
	GracefulRollout bool
}

// Trigger is when a workload starts.
type Trigger struct {
	Kind     string
	Schedule string        // TriggerCron
	Interval time.Duration // TriggerCron: between two ticks; TriggerLag: polling interval
	// TriggerLag: the group whose lag is read, and the activation threshold (a run starts when
	// the lag is above it).
	Group      string
	Activation int64
	// OffsetResetEarliest: a partition the group never committed counts as lag in full.
	OffsetResetEarliest bool
}

// KustomizeBuild renders dir like `kubectl apply -k` and returns its objects as generic maps.
func KustomizeBuild(dir string) ([]map[string]any, error) {
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	rm, err := k.Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return nil, fmt.Errorf("kustomize build %s: %w", dir, err)
	}
	var out []map[string]any
	for _, r := range rm.Resources() {
		m, err := r.Map()
		if err != nil {
			return nil, fmt.Errorf("kustomize build %s: %w", dir, err)
		}
		out = append(out, m)
	}
	return out, nil
}

// exampleSecrets reads the stringData of the Secrets in an example file (secret.example.yaml).
func exampleSecrets(file string) (map[string]map[string]string, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	out := map[string]map[string]string{}
	for _, part := range strings.Split(string(data), "\n---") {
		var s corev1.Secret
		if err := yaml.Unmarshal([]byte(part), &s); err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		if s.Name != "" {
			out[s.Name] = s.StringData
		}
	}
	return out, nil
}

func decode(obj map[string]any, v any) error {
	b, err := json.Marshal(obj)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// containerEnv resolves a container's environment as the kubelet does: envFrom ConfigMaps, then
// env values and secretKeyRefs (an optional key the Secret lacks is left unset).
func containerEnv(c corev1.Container, configMaps map[string]map[string]string, secrets map[string]map[string]string) (map[string]string, error) {
	env := map[string]string{}
	for _, ef := range c.EnvFrom {
		switch {
		case ef.ConfigMapRef != nil:
			cm, ok := configMaps[ef.ConfigMapRef.Name]
			if !ok {
				return nil, fmt.Errorf("container %s: envFrom ConfigMap %s not defined", c.Name, ef.ConfigMapRef.Name)
			}
			for k, v := range cm {
				env[ef.Prefix+k] = v
			}
		case ef.SecretRef != nil:
			for k, v := range secrets[ef.SecretRef.Name] {
				env[ef.Prefix+k] = v
			}
		}
	}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			env[e.Name] = e.Value
		case e.ValueFrom.SecretKeyRef != nil:
			r := e.ValueFrom.SecretKeyRef
			v, ok := secrets[r.Name][r.Key]
			if !ok {
				if r.Optional != nil && *r.Optional {
					continue
				}
				return nil, fmt.Errorf("container %s: %s from Secret %s key %s, which the example lacks", c.Name, e.Name, r.Name, r.Key)
			}
			env[e.Name] = v
		case e.ValueFrom.ConfigMapKeyRef != nil:
			r := e.ValueFrom.ConfigMapKeyRef
			env[e.Name] = configMaps[r.Name][r.Key]
		}
	}
	return env, nil
}

func function(c corev1.Container) (string, error) {
	if len(c.Command) != 1 {
		return "", fmt.Errorf("container %s: command %v, want one binary", c.Name, c.Command)
	}
	return path.Base(c.Command[0]), nil
}

// KubernetesWorkloads derives the workloads of a rendered kustomization (CronJobs and KEDA
// ScaledJobs), with the Secrets of secretFile as the user's filled-in copy.
func KubernetesWorkloads(shape string, objs []map[string]any, secretFile string) ([]Workload, error) {
	secrets, err := exampleSecrets(secretFile)
	if err != nil {
		return nil, err
	}
	configMaps := map[string]map[string]string{}
	for _, o := range objs {
		if o["kind"] == "ConfigMap" {
			var cm corev1.ConfigMap
			if err := decode(o, &cm); err != nil {
				return nil, err
			}
			configMaps[cm.Name] = cm.Data
		}
	}
	var out []Workload
	for _, o := range objs {
		switch o["kind"] {
		case "CronJob":
			var cj batchv1.CronJob
			if err := decode(o, &cj); err != nil {
				return nil, err
			}
			w, err := podWorkload(shape, cj.Name, cj.Spec.JobTemplate.Spec, configMaps, secrets)
			if err != nil {
				return nil, err
			}
			iv, err := cronInterval(cj.Spec.Schedule)
			if err != nil {
				return nil, fmt.Errorf("CronJob %s: %w", cj.Name, err)
			}
			w.Trigger = Trigger{Kind: TriggerCron, Schedule: cj.Spec.Schedule, Interval: iv}
			if cj.Spec.ConcurrencyPolicy != batchv1.ForbidConcurrent {
				return nil, fmt.Errorf("CronJob %s: concurrencyPolicy %q: runs may overlap", cj.Name, cj.Spec.ConcurrencyPolicy)
			}
			w.MaxRunning, w.GracefulRollout = 1, true
			out = append(out, w)
		case "ScaledJob":
			var sj struct {
				Metadata struct{ Name string }
				Spec     struct {
					PollingInterval *int32
					MaxReplicaCount *int32
					JobTargetRef    batchv1.JobSpec
					Rollout         struct{ Strategy string }
					Triggers        []struct {
						Type     string
						Metadata map[string]string
					}
				}
			}
			if err := decode(o, &sj); err != nil {
				return nil, err
			}
			name := sj.Metadata.Name
			w, err := podWorkload(shape, name, sj.Spec.JobTargetRef, configMaps, secrets)
			if err != nil {
				return nil, err
			}
			if len(sj.Spec.Triggers) != 1 || sj.Spec.Triggers[0].Type != "kafka" {
				return nil, fmt.Errorf("ScaledJob %s: want one kafka trigger", name)
			}
			md := sj.Spec.Triggers[0].Metadata
			group := md["consumerGroup"]
			if n := md["consumerGroupFromEnv"]; n != "" {
				group = w.Env[n]
			}
			poll := 30 * time.Second // KEDA's default
			if sj.Spec.PollingInterval != nil {
				poll = time.Duration(*sj.Spec.PollingInterval) * time.Second
			}
			w.Trigger = Trigger{Kind: TriggerLag, Interval: poll, Group: group, OffsetResetEarliest: md["offsetResetPolicy"] == "earliest"}
			if w.Trigger.Activation, err = strconv.ParseInt(orDefault(md["activationLagThreshold"], "0"), 10, 64); err != nil {
				return nil, fmt.Errorf("ScaledJob %s: activationLagThreshold: %w", name, err)
			}
			w.MaxRunning = 100 // KEDA's default maxReplicaCount
			if sj.Spec.MaxReplicaCount != nil {
				w.MaxRunning = int(*sj.Spec.MaxReplicaCount)
			}
			w.GracefulRollout = sj.Spec.Rollout.Strategy == "gradual"
			out = append(out, w)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

func podWorkload(shape, name string, js batchv1.JobSpec, configMaps, secrets map[string]map[string]string) (Workload, error) {
	ps := js.Template.Spec
	if len(ps.Containers) != 1 {
		return Workload{}, fmt.Errorf("%s: %d containers", name, len(ps.Containers))
	}
	c := ps.Containers[0]
	fn, err := function(c)
	if err != nil {
		return Workload{}, fmt.Errorf("%s: %w", name, err)
	}
	env, err := containerEnv(c, configMaps, secrets)
	if err != nil {
		return Workload{}, fmt.Errorf("%s: %w", name, err)
	}
	w := Workload{Shape: shape, Name: name, Function: fn, Args: c.Args, Env: env, RetryLimit: 6}
	if js.BackoffLimit != nil {
		w.RetryLimit = int(*js.BackoffLimit)
	}
	if js.ActiveDeadlineSeconds != nil {
		w.Deadline = time.Duration(*js.ActiveDeadlineSeconds) * time.Second
	}
	return w, nil
}

// ACASecretValues are the values the replay stores in the Key Vault secrets the template refers to.
var acaSecretValues = map[string]string{
	"source-sasl-username": "mm2go", "source-sasl-password": "not-a-real-password",
	"target-sasl-username": "mm2go", "target-sasl-password": "not-a-real-password",
	"target-eventhubs-connection-string": "Endpoint=sb://mm2go-example.servicebus.windows.net/;SharedAccessKeyName=mm2go;SharedAccessKey=bm90LWEta2V5",
}

// ACAWorkloads evaluates the ARM template with its parameters file and overrides, and derives
// the Container Apps jobs it deploys.
func ACAWorkloads(templateFile, paramsFile string, overrides map[string]any) ([]Workload, error) {
	var tmpl, pf map[string]any
	for f, v := range map[string]*map[string]any{templateFile: &tmpl, paramsFile: &pf} {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		if err := json.Unmarshal(data, v); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
	}
	params, _ := pf["parameters"].(map[string]any)
	for k, v := range overrides {
		params[k] = map[string]any{"value": v}
	}
	ctx := armeval.Context{SubscriptionID: "00000000-0000-0000-0000-000000000000", ResourceGroup: "mm2go-rg", Location: "westeurope"}
	pre, err := armeval.New(tmpl, params, ctx)
	if err != nil {
		return nil, err
	}
	id, err := pre.Eval("[resourceId('Microsoft.ManagedIdentity/userAssignedIdentities', parameters('identityName'))]")
	if err != nil {
		return nil, err
	}
	ctx.References = map[string]map[string]any{id.(string): {"clientId": "11111111-1111-1111-1111-111111111111", "principalId": "22222222-2222-2222-2222-222222222222"}}
	tp, err := armeval.New(tmpl, params, ctx)
	if err != nil {
		return nil, err
	}
	resources, _ := tmpl["resources"].([]any)
	var out []Workload
	for _, r := range resources {
		ev, err := tp.Eval(r)
		if err != nil {
			return nil, err
		}
		var res struct {
			Type       string
			Name       string
			Condition  *bool
			Properties struct {
				Configuration struct {
					TriggerType           string
					ReplicaTimeout        int
					ReplicaRetryLimit     int
					ScheduleTriggerConfig *struct {
						CronExpression string
						Parallelism    int
					}
					EventTriggerConfig *struct {
						Scale struct {
							PollingInterval int
							MaxExecutions   int
							Rules           []struct {
								Type     string
								Metadata map[string]string
							}
						}
					}
				}
				Template struct {
					Containers []struct {
						Command []string
						Args    []string
						Env     []struct{ Name, Value, SecretRef string }
					}
				}
			}
		}
		if err := decode(ev.(map[string]any), &res); err != nil {
			return nil, err
		}
		if res.Type != "Microsoft.App/jobs" || (res.Condition != nil && !*res.Condition) {
			continue
		}
		cfg, c := res.Properties.Configuration, res.Properties.Template.Containers[0]
		w := Workload{Shape: "aca", Name: res.Name, Function: path.Base(c.Command[0]), Args: c.Args, Env: map[string]string{},
			Deadline: time.Duration(cfg.ReplicaTimeout) * time.Second, RetryLimit: cfg.ReplicaRetryLimit, GracefulRollout: true}
		for _, e := range c.Env {
			if e.SecretRef != "" {
				v, ok := acaSecretValues[e.SecretRef]
				if !ok {
					return nil, fmt.Errorf("job %s: no value for secret %s", res.Name, e.SecretRef)
				}
				w.Env[e.Name] = v
				continue
			}
			w.Env[e.Name] = e.Value
		}
		switch cfg.TriggerType {
		case "Schedule":
			iv, err := cronInterval(cfg.ScheduleTriggerConfig.CronExpression)
			if err != nil {
				return nil, fmt.Errorf("job %s: %w", res.Name, err)
			}
			w.Trigger = Trigger{Kind: TriggerCron, Schedule: cfg.ScheduleTriggerConfig.CronExpression, Interval: iv}
			// A Container Apps schedule job has no concurrency policy: the next tick starts
			// another execution whatever runs; replicaTimeout below the interval keeps them apart.
			w.MaxRunning = 0
		case "Event":
			sc := cfg.EventTriggerConfig.Scale
			md := sc.Rules[0].Metadata
			act, err := strconv.ParseInt(orDefault(md["activationLagThreshold"], "0"), 10, 64)
			if err != nil {
				return nil, err
			}
			w.Trigger = Trigger{Kind: TriggerLag, Interval: time.Duration(sc.PollingInterval) * time.Second, Group: md["consumerGroup"],
				Activation: act, OffsetResetEarliest: md["offsetResetPolicy"] == "earliest"}
			w.MaxRunning = sc.MaxExecutions
		default:
			return nil, fmt.Errorf("job %s: trigger %q", res.Name, cfg.TriggerType)
		}
		out = append(out, w)
	}
	return out, nil
}

// RepoFile is a path below the repository root, from this package's directory (deploy/replay).
func RepoFile(parts ...string) string {
	return filepath.Join(append([]string{"..", ".."}, parts...)...)
}

// Service is a Knative Service of a rendered kustomization, as the revision's pod would run it.
type Service struct {
	Name     string
	Function string
	Args     []string
	Env      map[string]string
	// Readiness probe: the path and the period; period 0 is Knative's start-up probing
	// (every 25 ms until ready).
	ReadinessPath   string
	ReadinessPeriod time.Duration
	Port            int32
}

// Ping is a PingSource: its schedule and the Service it wakes.
type Ping struct {
	Name, Schedule, Sink string
	Interval             time.Duration
}

// KnativeServices derives the Services and PingSources of a rendered kustomization.
func KnativeServices(objs []map[string]any, secretFile string) ([]Service, []Ping, error) {
	secrets, err := exampleSecrets(secretFile)
	if err != nil {
		return nil, nil, err
	}
	configMaps := map[string]map[string]string{}
	for _, o := range objs {
		if o["kind"] == "ConfigMap" {
			var cm corev1.ConfigMap
			if err := decode(o, &cm); err != nil {
				return nil, nil, err
			}
			configMaps[cm.Name] = cm.Data
		}
	}
	var svcs []Service
	var pings []Ping
	for _, o := range objs {
		switch o["kind"] {
		case "Service":
			if o["apiVersion"] != "serving.knative.dev/v1" {
				continue
			}
			var s struct {
				Metadata struct{ Name string }
				Spec     struct {
					Template struct {
						Spec struct{ Containers []corev1.Container }
					}
				}
			}
			if err := decode(o, &s); err != nil {
				return nil, nil, err
			}
			c := s.Spec.Template.Spec.Containers[0]
			fn, err := function(c)
			if err != nil {
				return nil, nil, fmt.Errorf("Service %s: %w", s.Metadata.Name, err)
			}
			env, err := containerEnv(c, configMaps, secrets)
			if err != nil {
				return nil, nil, fmt.Errorf("Service %s: %w", s.Metadata.Name, err)
			}
			svc := Service{Name: s.Metadata.Name, Function: fn, Args: c.Args, Env: env}
			if len(c.Ports) == 1 {
				svc.Port = c.Ports[0].ContainerPort
			}
			if p := c.ReadinessProbe; p != nil && p.HTTPGet != nil {
				svc.ReadinessPath, svc.ReadinessPeriod = p.HTTPGet.Path, time.Duration(p.PeriodSeconds)*time.Second
			} else {
				return nil, nil, fmt.Errorf("Service %s: no HTTP readiness probe", s.Metadata.Name)
			}
			svcs = append(svcs, svc)
		case "PingSource":
			var p struct {
				Metadata struct{ Name string }
				Spec     struct {
					Schedule string
					Sink     struct{ Ref struct{ Name string } }
				}
			}
			if err := decode(o, &p); err != nil {
				return nil, nil, err
			}
			iv, err := cronInterval(p.Spec.Schedule)
			if err != nil {
				return nil, nil, fmt.Errorf("PingSource %s: %w", p.Metadata.Name, err)
			}
			pings = append(pings, Ping{Name: p.Metadata.Name, Schedule: p.Spec.Schedule, Sink: p.Spec.Sink.Ref.Name, Interval: iv})
		}
	}
	sort.Slice(svcs, func(i, j int) bool { return svcs[i].Name < svcs[j].Name })
	sort.Slice(pings, func(i, j int) bool { return pings[i].Name < pings[j].Name })
	return svcs, pings, nil
}
