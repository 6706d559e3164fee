package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mm2go/mm2go/test/testkit"
	"github.com/mm2go/mm2go/test/testkit/entrafake"
)

// runMirrorEnv runs `mirror run` with exactly env (plus PATH and HOME): the
// child sees Azure variables (IDENTITY_ENDPOINT, AZURE_*) that this test
// process never sets in its own environment.
func runMirrorEnv(t *testing.T, env ...string) MirrorResult {
	t.Helper()
	return RunMirror(t, append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "MM2_LOG_FORMAT=json"}, env...))
}

// oauthFlowEnv is a flow from the harness source to the OAUTHBEARER broker
// (the stand-in for an Event Hubs namespace reached with Azure AD).
func oauthFlowEnv(c testkit.Clusters, ob *oauthBroker, topic string) []string {
	return []string{
		"MM2_SOURCE_BOOTSTRAP_SERVERS=" + c.Source.Bootstrap,
		"MM2_TARGET_BOOTSTRAP_SERVERS=" + ob.OAuth,
		"MM2_TARGET_SSL_TRUSTSTORE_LOCATION=" + ob.CA,
		// The broker is on 127.0.0.1; tokens must be for the namespace.
		"MM2_TARGET_AZURE_SCOPE=https://" + ehNamespace + "/.default",
		"MM2_TOPICS=" + topic,
		"MM2_HEARTBEATS_REPLICATION_ENABLED=false",
		"MM2_REPLICATION_FACTOR=1",
		"MM2_OFFSET_SYNCS_TOPIC_REPLICATION_FACTOR=1",
		"MM2_OFFSET_STORAGE_REPLICATION_FACTOR=1",
		"MM2_OFFSET_STORAGE_PARTITIONS=3",
	}
}

// TestAzureADMirrorIdentities runs the real `mirror run` process against the
// OAUTHBEARER broker with each deployment's identity, configured only through
// the environment the platform provides: Container Apps managed identity
// (IDENTITY_ENDPOINT/IDENTITY_HEADER, system- and user-assigned), AKS workload
// identity (federated token file), and a service principal secret.
func TestAzureADMirrorIdentities(t *testing.T) {
	c := testkit.Require(t)
	fake := newFakeEntra(t)
	ob := startOAuthBroker(t, c, fake)
	tokenFile := filepath.Join(t.TempDir(), "azure-identity-token")
	if err := os.WriteFile(tokenFile, []byte(azServiceAccount), 0o600); err != nil {
		t.Fatal(err)
	}

	const certClient = "5a1d0c9e-0000-4000-8000-0000000000c1"
	cert, certPath := entrafake.ClientCertificate(t, certClient)
	fake.AddCertificate(certClient, cert)

	for _, test := range []struct {
		name    string
		env     []string
		grant   string
		subject string
	}{
		{name: "container apps system-assigned (default chain)", grant: "managed_identity", subject: entrafake.SystemAssignedID,
			env: []string{"MM2_TARGET_AZURE_AUTH=default", "IDENTITY_ENDPOINT=" + fake.IdentityEndpoint, "IDENTITY_HEADER=" + fake.IdentityHeader}},
		{name: "container apps user-assigned via AZURE_CLIENT_ID", grant: "managed_identity", subject: azUserAssignedMI,
			env: []string{"MM2_TARGET_AZURE_AUTH=managed-identity", "AZURE_CLIENT_ID=" + azUserAssignedMI,
				"IDENTITY_ENDPOINT=" + fake.IdentityEndpoint, "IDENTITY_HEADER=" + fake.IdentityHeader}},
		{name: "container apps user-assigned (default chain)", grant: "managed_identity", subject: azUserAssignedMI,
			env: []string{"MM2_TARGET_AZURE_AUTH=default", "AZURE_CLIENT_ID=" + azUserAssignedMI,
				"IDENTITY_ENDPOINT=" + fake.IdentityEndpoint, "IDENTITY_HEADER=" + fake.IdentityHeader}},
		{name: "user-assigned per cluster setting", grant: "managed_identity", subject: azUserAssignedMI,
			env: []string{"MM2_TARGET_AZURE_AUTH=managed-identity", "MM2_TARGET_AZURE_CLIENT_ID=" + azUserAssignedMI,
				"IDENTITY_ENDPOINT=" + fake.IdentityEndpoint, "IDENTITY_HEADER=" + fake.IdentityHeader}},
		{name: "aks workload identity (default chain)", grant: "workload_identity", subject: azWorkloadID,
			env: []string{"MM2_TARGET_AZURE_AUTH=default", "AZURE_CLIENT_ID=" + azWorkloadID, "AZURE_TENANT_ID=" + azTenant,
				"AZURE_FEDERATED_TOKEN_FILE=" + tokenFile, "AZURE_AUTHORITY_HOST=" + fake.AuthorityHost, "SSL_CERT_FILE=" + fake.CAFile}},
		{name: "service principal certificate", grant: "client_certificate", subject: certClient,
			env: []string{"MM2_TARGET_AZURE_AUTH=client-certificate", "MM2_TARGET_AZURE_TENANT_ID=" + azTenant,
				"MM2_TARGET_AZURE_CLIENT_ID=" + certClient, "MM2_TARGET_AZURE_CLIENT_CERTIFICATE_PATH=" + certPath,
				"MM2_TARGET_AZURE_AUTHORITY_HOST=" + fake.AuthorityHost, "SSL_CERT_FILE=" + fake.CAFile}},
		{name: "service principal secret", grant: "client_secret", subject: azSPClientID,
			env: []string{"MM2_TARGET_AZURE_AUTH=client-secret", "MM2_TARGET_AZURE_TENANT_ID=" + azTenant,
				"MM2_TARGET_AZURE_CLIENT_ID=" + azSPClientID, "MM2_TARGET_AZURE_CLIENT_SECRET=" + azSPSecret,
				"MM2_TARGET_AZURE_AUTHORITY_HOST=" + fake.AuthorityHost, "SSL_CERT_FILE=" + fake.CAFile, "MM2_LOG_LEVEL=debug"}},
	} {
		t.Run(test.name, func(t *testing.T) {
			topic := createTopic(t, c.Source.Bootstrap, testkit.Name(t, "az"), 3, nil)
			want := testkit.Produce(t, c.Source.Bootstrap, testkit.SampleRecords(topic, 3, 300)...)
			testkit.DeleteTopicsAtEnd(t, ob.Plain, "source."+topic)
			before := len(fake.Issued())
			r := runMirrorEnv(t, append(oauthFlowEnv(c, ob, topic), test.env...)...)
			if r.Code != 0 || r.Records() != int64(len(want)) {
				t.Fatalf("mirror run: exit %d, %d records (want %d)\nstdout: %s\nstderr: %s", r.Code, r.Records(), len(want), r.Stdout, lastLines(r.Stderr, 30))
			}
			testkit.AssertSameRecords(t, want, testkit.ReadAll(t, ob.Plain, "source."+topic))
			issued := fake.Issued()[before:]
			if len(issued) != 1 {
				// The process's clients of one cluster share one credential and token cache.
				t.Fatalf("the fake Entra ID issued %d tokens for one mirror run, want 1", len(issued))
			}
			for _, is := range issued {
				if is.Grant != test.grant || is.ClientID != test.subject || is.Audience != ob.Audience {
					t.Fatalf("issued %+v; want %s tokens for %s, audience %s", is, test.grant, test.subject, ob.Audience)
				}
			}
			if strings.Contains(r.Stdout+r.Stderr, azSPSecret) || strings.Contains(r.Stdout+r.Stderr, fake.IdentityHeader) {
				t.Fatal("a secret is in the mirror's output")
			}
		})
	}

	t.Run("wrong audience reported", func(t *testing.T) {
		topic := createTopic(t, c.Source.Bootstrap, testkit.Name(t, "az"), 1, nil)
		testkit.Produce(t, c.Source.Bootstrap, testkit.SampleRecords(topic, 1, 5)...)
		env := append(oauthFlowEnv(c, ob, topic), "MM2_TARGET_AZURE_AUTH=managed-identity",
			"IDENTITY_ENDPOINT="+fake.IdentityEndpoint, "IDENTITY_HEADER="+fake.IdentityHeader,
			"MM2_TARGET_AZURE_SCOPE=https://eventhubs.azure.net/.default")
		r := runMirrorEnv(t, env...)
		if r.Code == 0 {
			t.Fatalf("mirror run with a wrong-audience token succeeded:\n%s", r.Stdout)
		}
		if testing.Verbose() {
			t.Logf("mirror's error: %s", lastLines(strings.TrimSpace(r.Stderr), 1))
		}
		if !strings.Contains(r.Stderr, "SASL_AUTHENTICATION_FAILED") || !strings.Contains(r.Stderr, "the broker refused the Azure AD token") ||
			!strings.Contains(r.Stderr, "https://eventhubs.azure.net/.default") {
			t.Fatalf("the failure does not say the broker refused the token for the target:\n%s", lastLines(r.Stderr, 20))
		}
	})

	t.Run("no identity reported", func(t *testing.T) {
		topic := createTopic(t, c.Source.Bootstrap, testkit.Name(t, "az"), 1, nil)
		// Managed identity endpoint present but the header wrong: the token fetch fails.
		env := append(oauthFlowEnv(c, ob, topic), "MM2_TARGET_AZURE_AUTH=managed-identity",
			"IDENTITY_ENDPOINT="+fake.IdentityEndpoint, "IDENTITY_HEADER=not-the-header")
		r := runMirrorEnv(t, env...)
		if r.Code == 0 {
			t.Fatal("mirror run without a valid identity succeeded")
		}
		if testing.Verbose() {
			t.Logf("mirror's error: %s", lastLines(strings.TrimSpace(r.Stderr), 1))
		}
		for _, want := range []string{`cluster \"target\"`, "ManagedIdentityCredential"} {
			if !strings.Contains(r.Stderr, want) {
				t.Errorf("the failure lacks %s:\n%s", want, lastLines(r.Stderr, 20))
			}
		}
		if strings.Contains(r.Stderr, fake.IdentityHeader) {
			t.Error("the managed identity header is in the output")
		}
	})
}
