package e2e

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mm2go/mm2go/test/testkit"
	"github.com/mm2go/mm2go/test/testkit/entrafake"
)

// ehNamespace is the Event Hubs namespace the Azure AD tests pretend to reach:
// tokens are requested for https://<ehNamespace>/.default and the broker
// accepts only that audience.
const ehNamespace = "mm2go-test.servicebus.windows.net"

// oauthBroker is a third real Kafka cluster, started for the Azure AD tests
// and stopped when they end, with an extra SASL_SSL listener that accepts
// only OAUTHBEARER tokens signed by the fake Entra ID, for the namespace
// audience and the fake's issuer (KIP-768 broker-side validation).
type oauthBroker struct {
	Name      string
	Plain     string // PLAINTEXT listener (admin, reading results)
	OAuth     string // SASL_SSL OAUTHBEARER listener
	CA        string // CA of the broker certificate
	LogFile   string
	Audience  string
	JWKSFile  string
	Issuer    string
	KafkaHome string
}

// freePortBase finds a base port p in 31000-39990 with p..p+3 free.
func freePortBase(t *testing.T) int {
	t.Helper()
	b := make([]byte, 2)
	for range 200 {
		_, _ = rand.Read(b)
		base := 31000 + (int(b[0])<<8|int(b[1]))%900*10
		ok := true
		for p := base; p < base+4 && ok; p++ {
			ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
			if err != nil {
				ok = false
				continue
			}
			ln.Close()
		}
		if ok {
			return base
		}
	}
	t.Fatal("no free port range for the OAUTHBEARER broker")
	return 0
}

// tokenValidation is what the OAUTHBEARER listener checks: signatures against the keys at
// JWKSURL (file: or http(s):), the audience and the issuer.
type tokenValidation struct {
	JWKSURL, Audience, Issuer string
}

// startOAuthBroker starts the OAUTHBEARER cluster validating fake's tokens.
func startOAuthBroker(t *testing.T, c testkit.Clusters, fake *entrafake.Server) *oauthBroker {
	t.Helper()
	ob := startValidatingBroker(t, c, tokenValidation{JWKSURL: "file:" + fake.JWKSFile, Audience: entrafake.Audience(ehNamespace), Issuer: fake.Issuer})
	ob.JWKSFile = fake.JWKSFile
	return ob
}

// startValidatingBroker starts a third cluster whose OAUTH listener validates tokens as v says.
func startValidatingBroker(t *testing.T, c testkit.Clusters, v tokenValidation) *oauthBroker {
	t.Helper()
	// Another test may bind a port between our check and the broker's
	// start: try a few port ranges.
	var ob *oauthBroker
	for attempt := 0; ; attempt++ {
		var inUse bool
		ob, inUse = tryStartOAuthBroker(t, c, v, attempt == 2)
		if !inUse {
			return ob
		}
	}
}

func tryStartOAuthBroker(t *testing.T, c testkit.Clusters, v tokenValidation, last bool) (*oauthBroker, bool) {
	t.Helper()
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	base := freePortBase(t)
	ob := &oauthBroker{
		Name:      "azoauth" + hex.EncodeToString(b),
		Plain:     fmt.Sprintf("127.0.0.1:%d", base),
		OAuth:     fmt.Sprintf("127.0.0.1:%d", base+3),
		Audience:  v.Audience,
		Issuer:    v.Issuer,
		KafkaHome: c.KafkaHome,
	}
	if ob.KafkaHome == "" {
		ob.KafkaHome = filepath.Join(testkit.RepoRoot(t), "test", "kafka", "state")
	}
	// The listener's certificate is made here, not taken from the harness,
	// so that broker and clients always agree on the CA.
	keystore, ca := listenerCert(t)
	ob.CA = ca
	jwksURL := v.JWKSURL
	const validator = "org.apache.kafka.common.security.oauthbearer.BrokerJwtValidator"
	props := []string{
		fmt.Sprintf("listeners=PLAINTEXT://127.0.0.1:%d,CONTROLLER://127.0.0.1:%d,SASL_SSL://127.0.0.1:%d,OAUTH://127.0.0.1:%d", base, base+1, base+2, base+3),
		fmt.Sprintf("advertised.listeners=PLAINTEXT://127.0.0.1:%d,SASL_SSL://127.0.0.1:%d,OAUTH://127.0.0.1:%d", base, base+2, base+3),
		"listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL,OAUTH:SASL_SSL",
		"listener.name.oauth.sasl.enabled.mechanisms=OAUTHBEARER",
		"listener.name.oauth.oauthbearer.sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required ;",
		"listener.name.oauth.oauthbearer.sasl.server.callback.handler.class=org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler",
		"listener.name.oauth.oauthbearer.sasl.oauthbearer.jwks.endpoint.url=" + jwksURL,
		"listener.name.oauth.oauthbearer.sasl.oauthbearer.expected.audience=" + ob.Audience,
		"listener.name.oauth.oauthbearer.sasl.oauthbearer.expected.issuer=" + v.Issuer,
		// Kafka 4.1.0-4.1.1 validate nothing (signature, issuer, audience)
		// unless the broker validator is named (CVE-2026-33557); the
		// harness pins 4.1.1. Both spellings, listener and global; the
		// refusal tests below fail loudly if neither took effect.
		"listener.name.oauth.sasl.oauthbearer.jwt.validator.class=" + validator,
		"sasl.oauthbearer.jwt.validator.class=" + validator,
		"listener.name.oauth.ssl.keystore.type=PEM",
		"listener.name.oauth.ssl.keystore.location=" + keystore,
		"auto.create.topics.enable=false",
	}
	args := append([]string{"start", ob.Name, fmt.Sprint(base)}, props...)
	cmd := exec.Command(testkit.KafkaScript(t), args...)
	cmd.Env = append(os.Environ(),
		"MM2GO_KAFKA_OPTS=-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls="+jwksURL,
		"MM2GO_KAFKA_HOME="+ob.KafkaHome)
	if c.KafkaLib != "" {
		cmd.Env = append(cmd.Env, "MM2GO_KAFKA_LIB="+c.KafkaLib)
	}
	ob.LogFile = filepath.Join(ob.KafkaHome, ob.Name, "logs", "stdout.log")
	out, err := cmd.CombinedOutput()
	if err != nil {
		log, _ := os.ReadFile(ob.LogFile)
		if !last && strings.Contains(string(log), "Address already in use") {
			_ = os.RemoveAll(filepath.Join(ob.KafkaHome, ob.Name))
			return nil, true
		}
		t.Fatalf("starting the OAUTHBEARER broker: %v\n%s\n%s", err, out, lastLines(string(log), 40))
	}
	t.Cleanup(func() {
		stop := exec.Command(testkit.KafkaScript(t), "stop", ob.Name)
		stop.Env = append(os.Environ(), "MM2GO_KAFKA_HOME="+ob.KafkaHome)
		if out, err := stop.CombinedOutput(); err != nil {
			t.Errorf("stopping the OAUTHBEARER broker %s: %v\n%s", ob.Name, err, out)
		}
		if !t.Failed() {
			_ = os.RemoveAll(filepath.Join(ob.KafkaHome, ob.Name))
		}
	})
	return ob, false
}

// logSize and logSince let a test read what the broker logged in between,
// e.g. why it refused a token (the client only gets "invalid_token").
func (ob *oauthBroker) logSize() int64 {
	st, err := os.Stat(ob.LogFile)
	if err != nil {
		return 0
	}
	return st.Size()
}

func (ob *oauthBroker) logSince(off int64) string {
	b, _ := os.ReadFile(ob.LogFile)
	if int64(len(b)) < off {
		return ""
	}
	return string(b[off:])
}

func lastLines(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// listenerCert writes a test CA and a 127.0.0.1/localhost server certificate
// for the broker's OAUTH listener: the keystore PEM (PKCS#8 key, then the
// chain, as Kafka's PEM keystore wants) and the CA PEM for clients.
func listenerCert(t *testing.T) (keystore, caFile string) {
	t.Helper()
	caKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "mm2go azure e2e CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(48 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "localhost"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(48 * time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"},
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	p8, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	keystore, caFile = filepath.Join(dir, "server.pem"), filepath.Join(dir, "ca.pem")
	ks := append(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: p8}), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})...)
	ks = append(ks, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})...)
	if err := os.WriteFile(keystore, ks, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	return keystore, caFile
}
