package cluster

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mm2go/mm2go/shared/secret"
	"github.com/mm2go/mm2go/test/testkit"
)

const krbRealm = "MM2GO.TEST"

// testKDC is a real MIT Kerberos KDC (Debian's krb5-kdc) run by the test on
// loopback, with a broker principal kafka/127.0.0.1 and a client principal,
// each with a keytab.
type testKDC struct {
	krb5conf, brokerKeytab, clientKeytab string
	brokerPrincipal, clientPrincipal     string
}

func startKDC(t *testing.T) *testKDC {
	t.Helper()
	for _, tool := range []string{"krb5kdc", "kdb5_util", "kadmin.local"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is required (Debian packages krb5-kdc and krb5-admin-server; .ci/run installs them): %v", tool, err)
		}
	}
	d := t.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	k := &testKDC{
		krb5conf: filepath.Join(d, "krb5.conf"), brokerKeytab: filepath.Join(d, "broker.keytab"), clientKeytab: filepath.Join(d, "client.keytab"),
		brokerPrincipal: "kafka/127.0.0.1@" + krbRealm, clientPrincipal: "mm2go@" + krbRealm,
	}
	kdcConf := filepath.Join(d, "kdc.conf")
	write := func(f, s string) {
		if err := os.WriteFile(f, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(kdcConf, fmt.Sprintf(`[kdcdefaults]
 kdc_ports = %[1]d
 kdc_tcp_ports = %[1]d
[realms]
 %[2]s = {
  database_name = %[3]s/principal
  key_stash_file = %[3]s/stash
  acl_file = %[3]s/kadm5.acl
  supported_enctypes = aes256-cts-hmac-sha1-96:normal aes128-cts-hmac-sha1-96:normal
 }
`, port, krbRealm, d))
	write(filepath.Join(d, "kadm5.acl"), "")
	// TCP only (udp_preference_limit = 1), as both Java and gokrb5 can use it.
	write(k.krb5conf, fmt.Sprintf(`[libdefaults]
 default_realm = %[1]s
 dns_lookup_kdc = false
 dns_lookup_realm = false
 dns_canonicalize_hostname = false
 rdns = false
 udp_preference_limit = 1
[realms]
 %[1]s = {
  kdc = 127.0.0.1:%[2]d
 }
`, krbRealm, port))
	env := append(os.Environ(), "KRB5_CONFIG="+k.krb5conf, "KRB5_KDC_PROFILE="+kdcConf)
	run := func(name string, args ...string) {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Env = env
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
	}
	run("kdb5_util", "create", "-s", "-r", krbRealm, "-P", "kdc-master-password")
	for p, kt := range map[string]string{k.brokerPrincipal: k.brokerKeytab, k.clientPrincipal: k.clientKeytab} {
		run("kadmin.local", "-r", krbRealm, "-q", "addprinc -randkey "+p)
		run("kadmin.local", "-r", krbRealm, "-q", "ktadd -k "+kt+" "+p)
	}
	kdc := exec.Command("krb5kdc", "-n", "-r", krbRealm)
	kdc.Env = env
	logf, err := os.Create(filepath.Join(d, "kdc.log"))
	if err != nil {
		t.Fatal(err)
	}
	kdc.Stdout, kdc.Stderr = logf, logf
	if err := kdc.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = kdc.Process.Kill()
		_ = kdc.Wait()
		logf.Close()
	})
	testkit.WaitFor(t, 20*time.Second, "the KDC to listen", func() bool {
		c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	return k
}

// TestIntegrationGSSAPI authenticates with Kerberos against a real broker
// whose SASL_PLAINTEXT listener takes GSSAPI from a real MIT KDC, with the
// JAAS line Kafka's own clients use, and reads what it produced back byte
// for byte.
func TestIntegrationGSSAPI(t *testing.T) {
	t.Parallel() // its own KDC and broker
	c := testkit.Require(t)
	kdc := startKDC(t)
	b := testkit.StartExtraBroker(t, c, "gssapi", 4, func(base int) []string {
		return []string{
			fmt.Sprintf("listeners=PLAINTEXT://127.0.0.1:%d,CONTROLLER://127.0.0.1:%d,KRB://127.0.0.1:%d", base, base+1, base+3),
			fmt.Sprintf("advertised.listeners=PLAINTEXT://127.0.0.1:%d,KRB://127.0.0.1:%d", base, base+3),
			"listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,KRB:SASL_PLAINTEXT",
			"listener.name.krb.sasl.enabled.mechanisms=GSSAPI",
			"listener.name.krb.sasl.kerberos.service.name=kafka",
			fmt.Sprintf(`listener.name.krb.gssapi.sasl.jaas.config=com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true storeKey=true keyTab="%s" principal="%s";`, kdc.brokerKeytab, kdc.brokerPrincipal),
		}
	}, "MM2GO_KAFKA_OPTS=-Djava.security.krb5.conf="+kdc.krb5conf)

	jaas := func(keytab, principal string) secret.Secret {
		return secret.New(fmt.Sprintf(`com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true storeKey=true keyTab="%s" principal="%s";`, keytab, principal))
	}
	s := Settings{Alias: "source", Role: "source", BootstrapServers: []string{b.Addr(3)}, SecurityProtocol: ProtocolSASLPlaintext,
		SASLMechanism: MechanismGSSAPI, SASLKerberosServiceName: "kafka", SASLKerberosKrb5Conf: kdc.krb5conf,
		SASLJAASConfig: jaas(kdc.clientKeytab, kdc.clientPrincipal)}

	t.Run("produce and read back", func(t *testing.T) {
		ctx := testkit.Context(t, 60*time.Second)
		topic := testkit.CreateTopic(t, b.Plain, testkit.Name(t, "krb"), 1, nil)
		cl, err := NewClient(ctx, s, nil, kgo.DefaultProduceTopic(topic))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		if err := Ping(ctx, cl, s); err != nil {
			t.Fatalf("%v\nbroker log:\n%s", err, lastN(b.Log(), 30))
		}
		want := []*kgo.Record{{Topic: topic, Key: []byte("kerberos"), Value: []byte("authenticated with GSSAPI \x00\xff")}}
		if err := cl.ProduceSync(ctx, want...).FirstErr(); err != nil {
			t.Fatalf("producing: %v", err)
		}
		testkit.AssertSameRecords(t, want, testkit.ReadAll(t, b.Plain, topic))
	})

	t.Run("a principal the keytab has no key for is refused with its name", func(t *testing.T) {
		ctx := testkit.Context(t, 30*time.Second)
		bad := s
		bad.SASLJAASConfig = jaas(kdc.clientKeytab, "someone-else@"+krbRealm)
		cl, err := NewClient(ctx, bad, nil, kgo.RequestRetries(0))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		err = Ping(ctx, cl, bad)
		if err == nil {
			t.Fatal("connected without a key for the principal")
		}
		want := fmt.Sprintf(`connecting to cluster "source" at %s: Kerberos (GSSAPI as "someone-else@%s", service "kafka") failed: `, b.Addr(3), krbRealm)
		if !strings.HasPrefix(err.Error(), want) || !strings.Contains(err.Error(), "KDC_ERR_C_PRINCIPAL_UNKNOWN") {
			t.Errorf("error\n got %q\nwant %q + the KDC's answer", err, want)
		}
	})
}
