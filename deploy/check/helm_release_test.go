package check

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"knative.dev/pkg/kmeta"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/v2/lint/support"
	release "helm.sh/helm/v4/pkg/release/v1"
)

// TestHelmLint runs Helm v4's linter (`helm lint --strict`, with the schema) on the chart with
// its defaults and every example: no warning and no error. Informational messages (the chart
// has no icon) are logged.
func TestHelmLint(t *testing.T) {
	dir := repoRoot(t) + "/" + chartDir
	for _, c := range chartCases {
		l := action.NewLint()
		l.Strict = true
		l.Namespace = testNamespace
		res := l.Run([]string{dir}, c.values(t))
		if res.TotalChartsLinted != 1 {
			t.Errorf("%s: %d charts linted: %v", c.name, res.TotalChartsLinted, res.Errors)
		}
		for _, m := range res.Messages {
			if m.Severity >= support.WarningSev {
				t.Errorf("%s: helm lint: %s", c.name, m)
			} else {
				t.Logf("%s: helm lint: %s", c.name, m)
			}
		}
		for _, err := range res.Errors {
			t.Errorf("%s: helm lint: %v", c.name, err)
		}
	}
}

// podTemplate is the metadata and spec of one pod a chart object starts.
type podTemplate struct {
	meta metav1.ObjectMeta
	spec corev1.PodSpec
}

// podTemplates returns every pod template of dd (CronJobs, ScaledJobs, Knative Services) by
// where it is.
func podTemplates(t *testing.T, dd *decoded) map[string]podTemplate {
	t.Helper()
	out := map[string]podTemplate{}
	for name, cj := range dd.cronJobs {
		tp := cj.Spec.JobTemplate.Spec.Template
		out["CronJob "+name] = podTemplate{tp.ObjectMeta, tp.Spec}
	}
	for name, js := range scaledJobPods(t, dd) {
		out["ScaledJob "+name] = podTemplate{js.Template.ObjectMeta, js.Template.Spec}
	}
	for name, s := range dd.services {
		tp := s.Spec.Template
		out["Service "+name] = podTemplate{tp.ObjectMeta, tp.Spec.PodSpec}
	}
	return out
}

// hookPod returns the chart's `helm test` hook, decoded strictly as a Pod.
func hookPod(t *testing.T, rel *release.Release) *corev1.Pod {
	t.Helper()
	var tests []*release.Hook
	for _, h := range rel.Hooks {
		if slices.Contains(h.Events, release.HookTest) {
			tests = append(tests, h)
		}
	}
	if len(tests) != 1 {
		t.Fatalf("%d test hooks, want 1", len(tests))
	}
	docs := readDocs(t, tests[0].Path, []byte(tests[0].Manifest))
	if len(docs) != 1 || docs[0].kind != "Pod" {
		t.Fatalf("test hook %s: %d documents, first %v; want one Pod", tests[0].Path, len(docs), docs)
	}
	if err := checkSchema(t, docs[0]); err != nil {
		t.Fatal(err)
	}
	var p corev1.Pod
	if err := strict(docs[0].raw, &p); err != nil {
		t.Fatalf("test hook: %v", err)
	}
	return &p
}

// TestHelmChartRelease: what `helm install` leaves beside the objects, per shape: the
// settings' checksum on every pod template, the `helm test` Pod running `mirror status` with
// the settings and credentials of the functions, NOTES.txt, and in the Knative shape the
// probes and sources as Knative expects them.
func TestHelmChartRelease(t *testing.T) {
	ch := loadChart(t)
	for _, c := range chartCases {
		t.Run(c.name, func(t *testing.T) {
			rel, err := renderChart(t, ch, c.values(t))
			if err != nil {
				t.Fatal(err)
			}
			_, dd := renderCase(t, ch, c)
			cm := dd.configMaps["mm2go-settings"]
			if cm == nil {
				t.Fatal("ConfigMap mm2go-settings missing")
			}
			pods := podTemplates(t, dd)
			if len(pods) == 0 {
				t.Fatal("no pod templates")
			}
			sums := map[string]bool{}
			for where, p := range pods {
				sum := p.meta.Annotations["checksum/settings"]
				if len(sum) != 64 {
					t.Errorf("%s: checksum/settings %q, want a sha256 of the settings", where, sum)
				}
				sums[sum] = true
			}
			if len(sums) != 1 {
				t.Errorf("pods carry different settings checksums: %v", keys(sums))
			}

			pod := hookPod(t, rel)
			if pod.Annotations["helm.sh/hook"] != "test" || !strings.Contains(pod.Annotations["helm.sh/hook-delete-policy"], "before-hook-creation") {
				t.Errorf("test Pod annotations %v", pod.Annotations)
			}
			if pod.Spec.RestartPolicy != corev1.RestartPolicyNever || len(pod.Spec.Containers) != 1 {
				t.Fatalf("test Pod: restartPolicy %q, %d containers", pod.Spec.RestartPolicy, len(pod.Spec.Containers))
			}
			tc := pod.Spec.Containers[0]
			if !slices.Equal(tc.Command, []string{"/usr/local/bin/mirror"}) || !slices.Equal(tc.Args, []string{"status"}) {
				t.Errorf("test Pod runs %v %v, want /usr/local/bin/mirror status", tc.Command, tc.Args)
			}
			if pod.Spec.ServiceAccountName == "" || dd.accounts[pod.Spec.ServiceAccountName] == nil {
				t.Errorf("test Pod: serviceAccountName %q not defined", pod.Spec.ServiceAccountName)
			}
			checkEnvRefs(t, "test Pod", tc, dd)
			testEnv := podEnv(t, "test Pod", tc, dd)
			if loadSettings(t, "test Pod", testEnv) == nil {
				return
			}
			// The status Pod reads the clusters as the mirror does.
			for where, p := range pods {
				if p.spec.Containers[0].Name != "mirror" {
					continue
				}
				if env := podEnv(t, where, p.spec.Containers[0], dd); !maps.Equal(env, testEnv) {
					t.Errorf("test Pod environment differs from %s's:\n%v\n%v", where, testEnv, env)
				}
			}
			if !strings.Contains(rel.Info.Notes, "helm test mm2go") || !strings.Contains(rel.Info.Notes, "mm2go-settings") {
				t.Errorf("NOTES.txt does not say how to check the release:\n%s", rel.Info.Notes)
			}

			for name, sj := range dd.custom["ScaledJob"] {
				if got := nested(sj, "spec", "rollout", "strategy"); got != "gradual" {
					t.Errorf("ScaledJob %s: rollout.strategy %v, want gradual (an upgrade would kill a running burst)", name, got)
				}
			}
			if c.shape != "knative" {
				return
			}
			// The chart's Services and PingSources behave as knative/'s: readiness /healthz with no
			// periodSeconds, and ticks far enough apart that every Service scales to zero.
			checkKnativeServing(t, "chart", dd)
			for name, ks := range dd.kafkaSources {
				if got := nested(ks, "spec", "initialOffset"); got != "latest" {
					t.Errorf("KafkaSource %s: initialOffset %v, want latest (the scheduled bursts copy the backlog; earliest sends one request per existing record)", name, got)
				}
			}
			checkKafkaSourceHeartbeats(t, "chart", dd)
			// The chart README states the delivery settings the template renders.
			readme := string(mustRead(t, chartDir+"/README.md"))
			m := regexp.MustCompile(`(\d+) exponential retries from ([\d.]+) s, (\d+) s timeout`).FindStringSubmatch(readme)
			for name, ks := range dd.kafkaSources {
				delay, _ := isoSeconds(fmt.Sprint(nested(ks, "spec", "delivery", "backoffDelay")))
				timeout, _ := isoSeconds(fmt.Sprint(nested(ks, "spec", "delivery", "timeout")))
				got := []string{fmt.Sprint(nested(ks, "spec", "delivery", "retry")), strconv.FormatFloat(delay, 'g', -1, 64), strconv.FormatFloat(timeout, 'g', -1, 64)}
				if m == nil || !slices.Equal(m[1:], got) {
					t.Errorf("KafkaSource %s: delivery retry, backoffDelay, timeout %v; the chart README says %v", name, got, m)
				}
			}
			// The chart README and NOTES.txt state the PingSources' ticks as rendered.
			tick := regexp.MustCompile(`PingSources tick every (\d+) minutes`).FindStringSubmatch(readme)
			for name, p := range dd.pings {
				iv := cronInterval(t, "PingSource "+name, p.Spec.Schedule)
				if tick == nil || tick[1] != strconv.Itoa(int(iv.Minutes())) {
					t.Errorf("PingSource %s ticks every %v; the chart README says %v", name, iv, tick)
				}
				if !strings.Contains(rel.Info.Notes, name+" ("+p.Spec.Schedule+")") {
					t.Errorf("NOTES.txt does not name PingSource %s with its schedule %q:\n%s", name, p.Spec.Schedule, rel.Info.Notes)
				}
			}
		})
	}
}

// TestHelmSettingsChecksum: changing one setting changes the checksum on every pod template
// (a new Job pod, a new Knative Revision); rendering the same values again does not.
func TestHelmSettingsChecksum(t *testing.T) {
	ch := loadChart(t)
	for _, c := range chartCases {
		sumsOf := func(vals map[string]any) map[string]string {
			out := map[string]string{}
			for where, p := range podTemplates(t, decodeAll(t, chartDocs(t, ch, vals))) {
				out[where] = p.meta.Annotations["checksum/settings"]
			}
			return out
		}
		before, again := sumsOf(c.values(t)), sumsOf(c.values(t))
		changed := c.values(t)
		settings, _ := changed["settings"].(map[string]any)
		if settings == nil {
			settings = map[string]any{}
			changed["settings"] = settings
		}
		settings["MM2_LOG_LEVEL"] = "debug"
		after := sumsOf(changed)
		if !maps.Equal(before, again) {
			t.Errorf("%s: the same values gave other checksums: %v, %v", c.name, before, again)
		}
		for where, sum := range before {
			if after[where] == "" || after[where] == sum {
				t.Errorf("%s: %s: checksum/settings %q unchanged after a settings change", c.name, where, sum)
			}
		}
	}
}

// TestHelmTwoReleases installs every shape twice into one namespace (releases a and b): no
// object of one has the kind and name of an object of the other, their hooks included, and
// no Kafka consumer group is shared.
func TestHelmTwoReleases(t *testing.T) {
	ch := loadChart(t)
	for _, c := range chartCases {
		objects := map[string]string{}
		groups := map[string]string{}
		for _, name := range []string{"a", "b"} {
			rel, err := installDryRun(t, ch, name, c.values(t))
			if err != nil {
				t.Fatalf("%s: release %s: %v", c.name, name, err)
			}
			docs := readDocs(t, "release "+name, []byte(rel.Manifest))
			all := docs
			for _, h := range rel.Hooks {
				all = append(all, readDocs(t, "release "+name+" hook", []byte(h.Manifest))...)
			}
			for _, d := range all {
				key := d.kind + "/" + d.name
				if other, ok := objects[key]; ok {
					t.Errorf("%s: %s in release %s and in release %s", c.name, key, other, name)
				}
				objects[key] = name
				if !strings.HasPrefix(d.name, name+"-mm2go") {
					t.Errorf("%s: release %s: %s is not named after the release", c.name, name, key)
				}
			}
			dd := decodeAll(t, docs)
			var own []string
			for _, cm := range dd.configMaps {
				own = append(own, cm.Data["MM2_LAG_GROUP"], cm.Data["MM2_BURST_GROUP"])
			}
			for _, ks := range dd.kafkaSources {
				g, _ := nested(ks, "spec", "consumerGroup").(string)
				own = append(own, g)
			}
			for _, g := range own {
				if g == "" {
					continue
				}
				if other, ok := groups[g]; ok && other != name {
					t.Errorf("%s: consumer group %s in release %s and in release %s", c.name, g, other, name)
				}
				groups[g] = name
			}
		}
		if len(objects) < 8 {
			t.Errorf("%s: only %d objects in two releases", c.name, len(objects))
		}
	}
}

// TestHelmPodOptions: imagePullSecrets, nodeSelector, tolerations, affinity, podAnnotations and
// an image digest reach every pod of every shape, and the tag defaults to the appVersion.
func TestHelmPodOptions(t *testing.T) {
	ch := loadChart(t)
	const digest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	opts := map[string]any{
		"image":            map[string]any{"digest": digest},
		"imagePullSecrets": []any{map[string]any{"name": "registry-credentials"}},
		"nodeSelector":     map[string]any{"kubernetes.io/arch": "arm64"},
		"tolerations":      []any{map[string]any{"key": "dedicated", "operator": "Equal", "value": "kafka", "effect": "NoSchedule"}},
		"affinity": map[string]any{"nodeAffinity": map[string]any{"requiredDuringSchedulingIgnoredDuringExecution": map[string]any{
			"nodeSelectorTerms": []any{map[string]any{"matchExpressions": []any{map[string]any{"key": "pool", "operator": "In", "values": []any{"mirror"}}}}}}}},
		"podAnnotations": map[string]any{"example.com/team": "streaming"},
	}
	wantImage := "registry.example.com/mm2go:" + ch.Metadata.AppVersion + "@" + digest
	for _, c := range chartCases {
		vals := c.values(t)
		for k, v := range opts {
			if m, ok := v.(map[string]any); ok && k == "image" {
				img, _ := vals["image"].(map[string]any)
				if img == nil {
					img = map[string]any{}
				}
				maps.Copy(img, m)
				vals["image"] = img
				continue
			}
			vals[k] = v
		}
		rel, err := renderChart(t, ch, vals)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		docs := readDocs(t, "release", []byte(rel.Manifest))
		for _, d := range docs {
			if err := checkSchema(t, d); err != nil {
				t.Errorf("%s: %v", c.name, err)
			}
		}
		pods := podTemplates(t, decodeAll(t, docs))
		pods["test Pod"] = podTemplate{hookPod(t, rel).ObjectMeta, hookPod(t, rel).Spec}
		for where, p := range pods {
			where = c.name + ": " + where
			if img := p.spec.Containers[0].Image; img != wantImage {
				t.Errorf("%s: image %q, want %q", where, img, wantImage)
			}
			if len(p.spec.ImagePullSecrets) != 1 || p.spec.ImagePullSecrets[0].Name != "registry-credentials" {
				t.Errorf("%s: imagePullSecrets %v", where, p.spec.ImagePullSecrets)
			}
			if p.spec.NodeSelector["kubernetes.io/arch"] != "arm64" {
				t.Errorf("%s: nodeSelector %v", where, p.spec.NodeSelector)
			}
			if len(p.spec.Tolerations) != 1 || p.spec.Tolerations[0].Value != "kafka" {
				t.Errorf("%s: tolerations %v", where, p.spec.Tolerations)
			}
			if p.spec.Affinity == nil || p.spec.Affinity.NodeAffinity == nil {
				t.Errorf("%s: affinity %v", where, p.spec.Affinity)
			}
			if where != c.name+": test Pod" && p.meta.Annotations["example.com/team"] != "streaming" {
				t.Errorf("%s: annotations %v lack podAnnotations", where, p.meta.Annotations)
			}
		}
	}
	// Without a digest the tag is the appVersion.
	for where, p := range podTemplates(t, decodeAll(t, chartDocs(t, ch, map[string]any{}))) {
		if img := p.spec.Containers[0].Image; img != "registry.example.com/mm2go:"+ch.Metadata.AppVersion {
			t.Errorf("%s: image %q, want the appVersion %s as tag", where, img, ch.Metadata.AppVersion)
		}
	}
}

// TestHelmChartMetadata: what a chart repository and Artifact Hub read (sources, maintainers,
// annotations), and the files `helm package` keeps.
func TestHelmChartMetadata(t *testing.T) {
	ch := loadChart(t)
	md := ch.Metadata
	if len(md.Sources) == 0 || len(md.Maintainers) == 0 || md.Home == "" {
		t.Errorf("Chart.yaml: sources %v, maintainers %v, home %q", md.Sources, md.Maintainers, md.Home)
	}
	for _, a := range []string{"artifacthub.io/images", "artifacthub.io/links", "artifacthub.io/category"} {
		if md.Annotations[a] == "" {
			t.Errorf("Chart.yaml: annotation %s missing", a)
		}
	}
	if img := md.Annotations["artifacthub.io/images"]; !strings.Contains(img, ":"+md.AppVersion) {
		t.Errorf("artifacthub.io/images %q does not name the appVersion %s", img, md.AppVersion)
	}
	var files []string
	for _, f := range ch.Raw {
		files = append(files, f.Name)
	}
	for _, want := range []string{"README.md", "templates/NOTES.txt", "templates/tests/status.yaml", "examples/keda.yaml"} {
		if !slices.Contains(files, want) {
			t.Errorf("the packaged chart lacks %s (.helmignore?): has %v", want, files)
		}
	}
}

// TestHelmKnativeSenderAuth: in the chart's knative shape, as in knative/ (F11), every source
// requests the audience of the function it calls (its Service name), and with knative.oidc.issuer
// set each function accepts only its own audience and the OIDC identities of its own sources,
// so no function accepts a token minted for another. Two releases: the names follow the prefix.
func TestHelmKnativeSenderAuth(t *testing.T) {
	ch := loadChart(t)
	var kn chartCase
	for _, c := range chartCases {
		if c.shape == "knative" {
			kn = c
		}
	}
	subject := func(kind, name string) string {
		return "system:serviceaccount:" + testNamespace + ":" + strings.ToLower(kmeta.ChildName(name, "-oidc-sources.knative.dev-"+kind))
	}
	for _, release := range []string{"mm2go", "eu"} {
		for _, issuer := range []string{"", "https://oidc.example.com/cluster"} {
			vals := kn.values(t)
			if issuer != "" {
				vals["knative"].(map[string]any)["oidc"] = map[string]any{"issuer": issuer}
			}
			where := fmt.Sprintf("release %s, knative.oidc.issuer %q", release, issuer)
			dd := decodeAll(t, releaseDocs(t, ch, release, vals))
			for _, d := range readDocs(t, "knative/secret.example.yaml", mustRead(t, "knative/secret.example.yaml")) {
				if err := dd.decodeDoc(d); err != nil {
					t.Fatal(err)
				}
			}
			audiences := map[string][]string{} // Service -> sink.audience of each source calling it
			callers := map[string]map[string]bool{}
			add := func(src, svc, aud, sub string) {
				if aud != svc {
					t.Errorf("%s: %s calls %s with sink.audience %q, want the Service name %q", where, src, svc, aud, svc)
				}
				audiences[svc] = append(audiences[svc], aud)
				if callers[svc] == nil {
					callers[svc] = map[string]bool{}
				}
				callers[svc][sub] = true
			}
			for name, p := range dd.pings {
				aud := ""
				if p.Spec.Sink.Audience != nil {
					aud = *p.Spec.Sink.Audience
				}
				add("PingSource "+name, p.Spec.Sink.Ref.Name, aud, subject("PingSource", name))
			}
			for name, ks := range dd.kafkaSources {
				aud, _ := nested(ks, "spec", "sink", "audience").(string)
				add("KafkaSource "+name, sinkName(nested(ks, "spec", "sink", "ref", "name")), aud, subject("KafkaSource", name))
			}
			if len(dd.services) != 3 || len(callers) != 3 {
				t.Fatalf("%s: %d Services, %d called by sources; want 3 each", where, len(dd.services), len(callers))
			}
			for name, s := range dd.services {
				env := podEnv(t, where, s.Spec.Template.Spec.Containers[0], dd)
				aud, subs := env["MM2_SERVE_OIDC_AUDIENCE"], env["MM2_SERVE_OIDC_ALLOWED_SUBJECTS"]
				if issuer == "" {
					if aud != "" || subs != "" || env["MM2_SERVE_OIDC_ISSUER"] != "" {
						t.Errorf("%s: Service %s sets sender authentication (%q, %q) with no issuer", where, name, aud, subs)
					}
					continue
				}
				if env["MM2_SERVE_OIDC_ISSUER"] != issuer {
					t.Errorf("%s: Service %s: MM2_SERVE_OIDC_ISSUER %q", where, name, env["MM2_SERVE_OIDC_ISSUER"])
				}
				// Its own audience, the one every source calling it requests, and no other
				// function's.
				for _, a := range audiences[name] {
					if a != aud {
						t.Errorf("%s: Service %s accepts audience %q; its source requests %q", where, name, aud, a)
					}
				}
				for other, auds := range audiences {
					if other != name && slices.Contains(auds, aud) {
						t.Errorf("%s: Service %s accepts audience %q, which the sources of %s request", where, name, aud, other)
					}
				}
				listed := map[string]bool{}
				for _, sub := range strings.Split(subs, ",") {
					listed[strings.TrimSpace(sub)] = true
				}
				if !maps.Equal(listed, callers[name]) {
					t.Errorf("%s: Service %s allows subjects %v, want exactly its sources' %v", where, name, keys(listed), keys(callers[name]))
				}
				loadSettings(t, where+": Service "+name, env)
			}
		}
	}
}

// TestHelmOAuthBearer: a cluster that signs in with OAUTHBEARER at a token endpoint
// (<role>.oauthbearer.tokenEndpointUrl) also gets the allow list the functions require
// (<role>.oauthbearer.allowedUrls, MM2_<ROLE>_SASL_OAUTHBEARER_ALLOWED_URLS; Kafka 4's
// org.apache.kafka.sasl.oauthbearer.allowed.urls, docs/oauthbearer.md), documented in
// values.yaml; every function's settings then load, and an allow list without the endpoint is
// refused at install.
func TestHelmOAuthBearer(t *testing.T) {
	ch := loadChart(t)
	const endpoint = "https://idp.example.com/realms/kafka/protocol/openid-connect/token"
	jaas := `org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required clientId="mm2" clientSecret="s3cret-value" scope="kafka";`
	values := string(mustRead(t, chartDir+"/values.yaml"))
	for _, want := range []string{"tokenEndpointUrl:", "allowedUrls:", "sasl.oauthbearer.allowed.urls", "MM2_<ROLE>_SASL_OAUTHBEARER_ALLOWED_URLS"} {
		if !strings.Contains(values, want) {
			t.Errorf("values.yaml does not document %s", want)
		}
	}
	for _, c := range chartCases {
		if c.name == "azure-workload-identity" {
			continue
		}
		for _, allowed := range [][]any{nil, {endpoint, "https://idp2.example.com/token"}} {
			vals := c.values(t)
			o := map[string]any{"tokenEndpointUrl": endpoint}
			if allowed != nil {
				o["allowedUrls"] = allowed
			}
			tgt, _ := vals["target"].(map[string]any)
			if tgt == nil {
				tgt = map[string]any{}
				vals["target"] = tgt
			}
			tgt["oauthbearer"] = o
			where := fmt.Sprintf("%s, allowedUrls %v", c.name, allowed)
			dd := decodeAll(t, chartDocs(t, ch, vals))
			secrets := "deploy/kubernetes/secret.example.yaml"
			if c.shape == "knative" {
				secrets = "knative/secret.example.yaml"
			}
			for _, d := range readDocs(t, secrets, mustRead(t, secrets)) {
				if err := dd.decodeDoc(d); err != nil {
					t.Fatal(err)
				}
			}
			pods := podsOf(dd)
			if len(pods) == 0 {
				t.Fatalf("%s: no pods", where)
			}
			for pw, pod := range pods {
				for _, ct := range pod.containers {
					env := podEnv(t, pw, ct, dd)
					if env["MM2_TARGET_SASL_OAUTHBEARER_TOKEN_ENDPOINT_URL"] != endpoint || env["MM2_TARGET_SASL_MECHANISM"] != "OAUTHBEARER" {
						t.Errorf("%s: %s: token endpoint %q, mechanism %q", where, pw, env["MM2_TARGET_SASL_OAUTHBEARER_TOKEN_ENDPOINT_URL"], env["MM2_TARGET_SASL_MECHANISM"])
					}
					want := endpoint
					if allowed != nil {
						want = endpoint + ",https://idp2.example.com/token"
					}
					if got := env["MM2_TARGET_SASL_OAUTHBEARER_ALLOWED_URLS"]; got != want {
						t.Errorf("%s: %s: MM2_TARGET_SASL_OAUTHBEARER_ALLOWED_URLS %q, want %q", where, pw, got, want)
					}
					if !slices.ContainsFunc(ct.Env, func(e corev1.EnvVar) bool {
						return e.Name == "MM2_TARGET_SASL_JAAS_CONFIG" && e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil && e.ValueFrom.SecretKeyRef.Key == "target-sasl-jaas-config"
					}) {
						t.Errorf("%s: %s: MM2_TARGET_SASL_JAAS_CONFIG not read from the Secret key target-sasl-jaas-config", where, pw)
					}
					// The Secret's JAAS line, as a user stores it.
					env["MM2_TARGET_SASL_JAAS_CONFIG"] = jaas
					loadSettings(t, where+": "+pw, env)
				}
			}
		}
		vals := c.values(t)
		vals["target"] = map[string]any{"oauthbearer": map[string]any{"tokenEndpointUrl": endpoint, "allowedUrls": []any{"https://other.example.com/token"}}}
		if _, err := renderChart(t, ch, vals); err == nil || !strings.Contains(err.Error(), "target.oauthbearer.allowedUrls") {
			t.Errorf("%s: allowedUrls without the token endpoint: %v, want an error naming target.oauthbearer.allowedUrls", c.name, err)
		}
	}
}
