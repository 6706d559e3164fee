package cluster

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pavlo-v-chernykh/keystore-go/v4"
	"github.com/youmark/pkcs8"
	"software.sslmate.com/src/go-pkcs12"

	"github.com/mm2go/mm2go/shared/secret"
)

// Store passwords of the format tests; one is a single character, so that
// the checks for leaks in error text are not trivially satisfied.
const (
	storePass = "st0re-pass"
	keyPass   = "k3y-pass"
)

// storeFiles are p's CA and client key pair written in every store format.
type storeFiles struct {
	jksTrust, p12Trust, jksKeys, jksKeysOwnKeyPass, p12Keys, encPEMKeys string
	encKeyPEM                                                           string
}

func firstPEM(t *testing.T, s string) *pem.Block {
	t.Helper()
	b, _ := pem.Decode([]byte(s))
	if b == nil {
		t.Fatal("no PEM block")
	}
	return b
}

func writeStores(t *testing.T, p *testPKI) storeFiles {
	t.Helper()
	ca, err := x509.ParseCertificate(firstPEM(t, p.caPEM).Bytes)
	if err != nil {
		t.Fatal(err)
	}
	cliDER := firstPEM(t, p.clientCertPEM).Bytes
	cli, err := x509.ParseCertificate(cliDER)
	if err != nil {
		t.Fatal(err)
	}
	keyDER := firstPEM(t, p.clientKeyPEM).Bytes
	key, err := x509.ParsePKCS8PrivateKey(keyDER)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name string, b []byte) string {
		f := filepath.Join(p.dir, name)
		if err := os.WriteFile(f, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return f
	}
	jks := func(fill func(ks keystore.KeyStore)) []byte {
		ks := keystore.New()
		fill(ks)
		var buf bytes.Buffer
		if err := ks.Store(&buf, []byte(storePass)); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	chain := []keystore.Certificate{{Type: "X509", Content: cliDER}, {Type: "X509", Content: ca.Raw}}
	var f storeFiles
	f.jksTrust = write("trust.jks", jks(func(ks keystore.KeyStore) {
		if err := ks.SetTrustedCertificateEntry("ca", keystore.TrustedCertificateEntry{CreationTime: time.Now(), Certificate: keystore.Certificate{Type: "X509", Content: ca.Raw}}); err != nil {
			t.Fatal(err)
		}
	}))
	f.jksKeys = write("keys.jks", jks(func(ks keystore.KeyStore) {
		if err := ks.SetPrivateKeyEntry("client", keystore.PrivateKeyEntry{CreationTime: time.Now(), PrivateKey: keyDER, CertificateChain: chain}, []byte(storePass)); err != nil {
			t.Fatal(err)
		}
	}))
	f.jksKeysOwnKeyPass = write("keys-keypass.jks", jks(func(ks keystore.KeyStore) {
		if err := ks.SetPrivateKeyEntry("client", keystore.PrivateKeyEntry{CreationTime: time.Now(), PrivateKey: keyDER, CertificateChain: chain}, []byte(keyPass)); err != nil {
			t.Fatal(err)
		}
	}))
	p12, err := pkcs12.Modern.EncodeTrustStore([]*x509.Certificate{ca}, storePass)
	if err != nil {
		t.Fatal(err)
	}
	f.p12Trust = write("trust.p12", p12)
	p12, err = pkcs12.Modern.Encode(key, cli, []*x509.Certificate{ca}, storePass)
	if err != nil {
		t.Fatal(err)
	}
	f.p12Keys = write("keys.p12", p12)
	enc, err := pkcs8.MarshalPrivateKey(key, []byte(keyPass), nil)
	if err != nil {
		t.Fatal(err)
	}
	f.encKeyPEM = string(pem.EncodeToMemory(&pem.Block{Type: "ENCRYPTED PRIVATE KEY", Bytes: enc}))
	f.encPEMKeys = write("keys-enc.pem", []byte(f.encKeyPEM+p.clientCertPEM))
	return f
}

func TestTLSStoreFormats(t *testing.T) {
	p := newTestPKI(t)
	f := writeStores(t, p)
	sp, kp := secret.New(storePass), secret.New(keyPass)
	for _, test := range []struct {
		name string
		s    Settings
	}{
		{name: "JKS truststore, type detected", s: Settings{SSLTruststoreLocation: f.jksTrust, SSLTruststorePassword: sp}},
		{name: "JKS truststore, type set", s: Settings{SSLTruststoreLocation: f.jksTrust, SSLTruststoreType: "JKS", SSLTruststorePassword: sp}},
		{name: "PKCS12 truststore", s: Settings{SSLTruststoreLocation: f.p12Trust, SSLTruststoreType: "PKCS12", SSLTruststorePassword: sp}},
		{name: "PKCS12 truststore, type detected", s: Settings{SSLTruststoreLocation: f.p12Trust, SSLTruststorePassword: sp}},
		{name: "PEM truststore, type set", s: Settings{SSLTruststoreLocation: p.caFile, SSLTruststoreType: "pem"}},
		{name: "JKS keystore", s: Settings{SSLTruststoreLocation: f.jksTrust, SSLTruststorePassword: sp, SSLKeystoreLocation: f.jksKeys, SSLKeystoreType: "JKS", SSLKeystorePassword: sp}},
		{name: "JKS keystore, key password of its own", s: Settings{SSLTruststoreLocation: p.caFile, SSLKeystoreLocation: f.jksKeysOwnKeyPass, SSLKeystorePassword: sp, SSLKeyPassword: kp}},
		{name: "PKCS12 keystore", s: Settings{SSLTruststoreLocation: f.p12Trust, SSLTruststorePassword: sp, SSLKeystoreLocation: f.p12Keys, SSLKeystoreType: "PKCS12", SSLKeystorePassword: sp}},
		{name: "encrypted PKCS#8 PEM keystore file", s: Settings{SSLTruststoreLocation: p.caFile, SSLKeystoreLocation: f.encPEMKeys, SSLKeyPassword: kp}},
		{name: "encrypted PKCS#8 inline key", s: Settings{SSLTruststoreLocation: p.caFile, SSLKeystoreKey: secret.New(f.encKeyPEM), SSLKeystoreCertificateChain: p.clientCertPEM, SSLKeyPassword: kp}},
	} {
		t.Run(test.name, func(t *testing.T) {
			test.s.SSLEndpointIdentificationAlgorithm = "https"
			cfg, err := TLSConfig(test.s)
			if err != nil {
				t.Fatal(err)
			}
			// The configured trust replaces the system roots: exactly the CA.
			if cfg.RootCAs == nil || !cfg.RootCAs.Equal(p.caPool) {
				t.Errorf("RootCAs is not exactly the truststore's CA")
			}
			mtls := test.s.SSLKeystoreLocation != "" || test.s.SSLKeystoreKey.IsSet()
			if err := p.handshake(t, cfg, "localhost", mtls); err != nil {
				t.Fatalf("handshake: %v", err)
			}
		})
	}
	cfg, err := TLSConfig(Settings{})
	if err != nil || cfg.RootCAs != nil {
		t.Errorf("without a truststore RootCAs must be nil (the system roots): %v, %v", cfg, err)
	}
}

func TestTLSStoreErrors(t *testing.T) {
	p := newTestPKI(t)
	f := writeStores(t, p)
	// Wrong passwords of one and two characters: the error must name the
	// setting and stay intact (no "[redacted]" spliced into words).
	for _, wrong := range []string{"s", "ks", "wrong-password"} {
		w := secret.New(wrong)
		for _, test := range []struct {
			name, want string
			s          Settings
		}{
			{name: "JKS truststore", s: Settings{SSLTruststoreLocation: f.jksTrust, SSLTruststorePassword: w},
				want: "ssl.truststore.password: wrong password for the JKS store " + f.jksTrust + " (or the store is damaged)"},
			{name: "PKCS12 truststore", s: Settings{SSLTruststoreLocation: f.p12Trust, SSLTruststoreType: "PKCS12", SSLTruststorePassword: w},
				want: "ssl.truststore.password: wrong password for the PKCS12 truststore " + f.p12Trust},
			{name: "JKS keystore", s: Settings{SSLKeystoreLocation: f.jksKeys, SSLKeystorePassword: w},
				want: "ssl.keystore.password: wrong password for the JKS store " + f.jksKeys + " (or the store is damaged)"},
			{name: "JKS key password", s: Settings{SSLKeystoreLocation: f.jksKeysOwnKeyPass, SSLKeystorePassword: secret.New(storePass), SSLKeyPassword: w},
				want: `ssl.key.password: cannot open the private key "client" of the JKS store ` + f.jksKeysOwnKeyPass + ": wrong password?"},
			{name: "PKCS12 keystore", s: Settings{SSLKeystoreLocation: f.p12Keys, SSLKeystorePassword: w},
				want: "ssl.keystore.password: wrong password for the PKCS12 keystore " + f.p12Keys},
			{name: "encrypted PEM key", s: Settings{SSLKeystoreLocation: f.encPEMKeys, SSLKeyPassword: w},
				want: "ssl.key.password: wrong password for the encrypted private key in " + f.encPEMKeys},
		} {
			t.Run(test.name+"/"+wrong, func(t *testing.T) {
				_, err := TLSConfig(test.s)
				if err == nil {
					t.Fatal("no error")
				}
				if err.Error() != test.want {
					t.Errorf("error\n got %q\nwant %q", err, test.want)
				}
				for _, v := range []string{storePass, keyPass, secret.Redacted} {
					if strings.Contains(err.Error(), v) {
						t.Errorf("error contains %q: %v", v, err)
					}
				}
			})
		}
	}
	// A PKCS12 key password other than the store's.
	_, err := TLSConfig(Settings{SSLKeystoreLocation: f.p12Keys, SSLKeystorePassword: secret.New(storePass), SSLKeyPassword: secret.New(keyPass)})
	if want := "ssl.key.password: differs from ssl.keystore.password, but a PKCS12 keystore's key is opened with the store password: unset ssl.key.password or set it to the store password"; err == nil || err.Error() != want {
		t.Errorf("error %v, want %q", err, want)
	}
	// A password-protected PKCS12 store without a password.
	_, err = TLSConfig(Settings{SSLTruststoreLocation: f.p12Trust})
	if want := "ssl.truststore.password: required: the PKCS12 truststore " + f.p12Trust + " is password-protected"; err == nil || err.Error() != want {
		t.Errorf("error %v, want %q", err, want)
	}
	// A JKS store with two key entries: which one Java would pick depends on
	// the key manager, so it is refused.
	ks := keystore.New()
	pk, _ := x509.ParsePKCS8PrivateKey(firstPEM(t, p.clientKeyPEM).Bytes)
	der, _ := x509.MarshalPKCS8PrivateKey(pk)
	for _, a := range []string{"a", "b"} {
		if err := ks.SetPrivateKeyEntry(a, keystore.PrivateKeyEntry{CreationTime: time.Now(), PrivateKey: der, CertificateChain: []keystore.Certificate{{Type: "X509", Content: firstPEM(t, p.clientCertPEM).Bytes}}}, []byte(storePass)); err != nil {
			t.Fatal(err)
		}
	}
	var buf bytes.Buffer
	if err := ks.Store(&buf, []byte(storePass)); err != nil {
		t.Fatal(err)
	}
	two := filepath.Join(p.dir, "two.jks")
	if err := os.WriteFile(two, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = TLSConfig(Settings{SSLKeystoreLocation: two, SSLKeystorePassword: secret.New(storePass)})
	if err == nil || !strings.Contains(err.Error(), "ssl.keystore.location: want exactly one private key entry in the JKS keystore, found 2") {
		t.Errorf("two keys: %v", err)
	}
}
