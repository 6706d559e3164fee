package cluster

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mm2go/mm2go/shared/secret"
)

// testPKI is a CA made in the test, a server certificate for localhost /
// 127.0.0.1 and a client certificate, all signed by it.
type testPKI struct {
	caPEM               string
	server              tls.Certificate
	clientCertPEM       string
	clientKeyPEM        string
	otherCAPEM          string // an unrelated CA
	caPool              *x509.CertPool
	dir, caFile, ksFile string
}

func newTestPKI(t *testing.T) *testPKI {
	t.Helper()
	newKey := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	serial := int64(1)
	newCA := func(name string) (*x509.Certificate, *ecdsa.PrivateKey, string) {
		key := newKey()
		serial++
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
			IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
		if err != nil {
			t.Fatal(err)
		}
		cert, _ := x509.ParseCertificate(der)
		return cert, key, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	}
	ca, caKey, caPEM := newCA("mm2go test CA")
	_, _, otherPEM := newCA("other CA")
	leaf := func(cn string, usage x509.ExtKeyUsage, dns []string, ips []net.IP) (certPEM, keyPEM string) {
		key := newKey()
		serial++
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
			DNSNames: dns, IPAddresses: ips,
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		kder, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			t.Fatal(err)
		}
		return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})),
			string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}))
	}
	srvCert, srvKey := leaf("localhost", x509.ExtKeyUsageServerAuth, []string{"localhost"}, []net.IP{net.IPv4(127, 0, 0, 1)})
	server, err := tls.X509KeyPair([]byte(srvCert), []byte(srvKey))
	if err != nil {
		t.Fatal(err)
	}
	cliCert, cliKey := leaf("client", x509.ExtKeyUsageClientAuth, nil, nil)
	p := &testPKI{caPEM: caPEM, server: server, clientCertPEM: cliCert, clientKeyPEM: cliKey, otherCAPEM: otherPEM, dir: t.TempDir()}
	p.caPool = x509.NewCertPool()
	p.caPool.AddCert(ca)
	p.caFile = filepath.Join(p.dir, "ca.pem")
	p.ksFile = filepath.Join(p.dir, "client.pem")
	if err := os.WriteFile(p.caFile, []byte(caPEM), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p.ksFile, []byte(cliKey+cliCert), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// handshake runs a TLS handshake between cfg (as franz-go would use it when
// dialing serverName) and a server presenting p's server certificate. With
// requireClient, the server demands a client certificate signed by p's CA.
func (p *testPKI) handshake(t *testing.T, cfg *tls.Config, serverName string, requireClient bool) error {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	srvCfg := &tls.Config{Certificates: []tls.Certificate{p.server}}
	if requireClient {
		srvCfg.ClientAuth, srvCfg.ClientCAs = tls.RequireAndVerifyClientCert, p.caPool
	}
	srvErr := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			srvErr <- err
			return
		}
		defer c.Close()
		tc := tls.Server(c, srvCfg)
		err = tc.Handshake()
		if err == nil {
			// TLS 1.3 reports a rejected client certificate after the
			// client's handshake returns: read to see the alert.
			_, err = tc.Write([]byte{1})
		}
		srvErr <- err
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cc := cfg.Clone()
	cc.ServerName = serverName
	tc := tls.Client(c, cc)
	_ = tc.SetDeadline(time.Now().Add(5 * time.Second))
	cerr := tc.Handshake()
	if cerr == nil {
		_, cerr = tc.Read(make([]byte, 1))
	}
	if cerr != nil {
		_ = c.Close()
		<-srvErr
		return cerr
	}
	return <-srvErr
}

func TestTLSConfigHandshakes(t *testing.T) {
	p := newTestPKI(t)
	for _, test := range []struct {
		name          string
		s             Settings
		serverName    string
		requireClient bool
		wantErr       string
	}{
		{name: "CA file", s: Settings{SSLTruststoreLocation: p.caFile, SSLEndpointIdentificationAlgorithm: "https"}, serverName: "localhost"},
		{name: "inline CA, IP name", s: Settings{SSLTruststoreCertificates: p.caPEM, SSLEndpointIdentificationAlgorithm: "HTTPS"}, serverName: "127.0.0.1"},
		{name: "system roots only", s: Settings{SSLEndpointIdentificationAlgorithm: "https"}, serverName: "localhost", wantErr: "certificate signed by unknown authority"},
		{name: "wrong CA", s: Settings{SSLTruststoreCertificates: p.otherCAPEM, SSLEndpointIdentificationAlgorithm: "https"}, serverName: "localhost", wantErr: "unknown authority"},
		{name: "host name checked", s: Settings{SSLTruststoreLocation: p.caFile, SSLEndpointIdentificationAlgorithm: "https"}, serverName: "broker.example.com", wantErr: "not broker.example.com"},
		{name: "host name check disabled", s: Settings{SSLTruststoreLocation: p.caFile}, serverName: "broker.example.com"},
		{name: "check disabled still verifies chain", s: Settings{SSLTruststoreCertificates: p.otherCAPEM}, serverName: "broker.example.com", wantErr: "unknown authority"},
		{name: "client cert from keystore file", s: Settings{SSLTruststoreLocation: p.caFile, SSLKeystoreLocation: p.ksFile, SSLEndpointIdentificationAlgorithm: "https"}, serverName: "localhost", requireClient: true},
		{name: "client cert inline", s: Settings{SSLTruststoreLocation: p.caFile, SSLKeystoreKey: secret.New(p.clientKeyPEM), SSLKeystoreCertificateChain: p.clientCertPEM, SSLEndpointIdentificationAlgorithm: "https"}, serverName: "localhost", requireClient: true},
		{name: "client cert missing", s: Settings{SSLTruststoreLocation: p.caFile, SSLEndpointIdentificationAlgorithm: "https"}, serverName: "localhost", requireClient: true, wantErr: "certificate"},
	} {
		t.Run(test.name, func(t *testing.T) {
			cfg, err := TLSConfig(test.s)
			if err != nil {
				t.Fatal(err)
			}
			if cfg.MinVersion != tls.VersionTLS12 {
				t.Errorf("MinVersion = %x", cfg.MinVersion)
			}
			err = p.handshake(t, cfg, test.serverName, test.requireClient)
			switch {
			case test.wantErr == "" && err != nil:
				t.Fatalf("handshake: %v", err)
			case test.wantErr != "" && err == nil:
				t.Fatalf("handshake succeeded, want error containing %q", test.wantErr)
			case test.wantErr != "" && !strings.Contains(err.Error(), test.wantErr):
				t.Fatalf("handshake error %q does not contain %q", err, test.wantErr)
			}
		})
	}
}

func TestTLSConfigErrors(t *testing.T) {
	p := newTestPKI(t)
	const keyMarker = "MIG" // start of every base64 DER key; must never show up
	junk := filepath.Join(p.dir, "store.jks")
	if err := os.WriteFile(junk, []byte{0xfe, 0xed, 0xfe, 0xed, 0, 0, 0, 2}, 0o600); err != nil {
		t.Fatal(err)
	}
	encrypted := string(pem.EncodeToMemory(&pem.Block{Type: "ENCRYPTED PRIVATE KEY", Bytes: []byte("x")}))
	legacy := string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Headers: map[string]string{"Proc-Type": "4,ENCRYPTED", "DEK-Info": "AES-128-CBC,00"}, Bytes: []byte("x")}))
	otherKey := newTestPKI(t).clientKeyPEM
	for _, test := range []struct {
		name    string
		s       Settings
		wantErr string
	}{
		{name: "missing CA file", s: Settings{SSLTruststoreLocation: filepath.Join(p.dir, "nope.pem")}, wantErr: "ssl.truststore.location: open"},
		{name: "JKS truststore without password", s: Settings{SSLTruststoreLocation: junk}, wantErr: "ssl.truststore.password: required to open the JKS store " + junk},
		{name: "JKS type, PEM file", s: Settings{SSLTruststoreLocation: p.caFile, SSLTruststoreType: "jks", SSLTruststorePassword: secret.New("pw")}, wantErr: "ssl.truststore.location: not a readable JKS store"},
		{name: "PEM truststore with password", s: Settings{SSLTruststoreLocation: p.caFile, SSLTruststorePassword: secret.New("pw")}, wantErr: "ssl.truststore.password: must not be set for a PEM truststore"},
		{name: "unknown store type", s: Settings{SSLTruststoreLocation: p.caFile, SSLTruststoreType: "BKS"}, wantErr: `ssl.truststore.type: "BKS" is not supported (want JKS, PKCS12 or PEM)`},
		{name: "inline CA with JKS type", s: Settings{SSLTruststoreCertificates: p.caPEM, SSLTruststoreType: "JKS"}, wantErr: "ssl.truststore.type: must be PEM (or empty) with ssl.truststore.certificates"},
		{name: "PKCS12 truststore is garbage", s: Settings{SSLTruststoreLocation: p.caFile + ".p12", SSLTruststoreType: "PKCS12"}, wantErr: "ssl.truststore.location: open"},
		{name: "garbage inline CA", s: Settings{SSLTruststoreCertificates: "hello"}, wantErr: "ssl.truststore.certificates: not PEM"},
		{name: "keystore without key", s: Settings{SSLKeystoreLocation: p.caFile}, wantErr: "ssl.keystore.location: want exactly one PEM private key block, found 0"},
		{name: "JKS keystore without password", s: Settings{SSLKeystoreLocation: junk}, wantErr: "ssl.keystore.password: required to open the JKS store " + junk},
		{name: "PEM keystore with store password", s: Settings{SSLKeystoreLocation: p.ksFile, SSLKeystorePassword: secret.New("pw")}, wantErr: "ssl.keystore.password: must not be set for a PEM keystore"},
		{name: "keystore password without keystore", s: Settings{SSLKeystorePassword: secret.New("pw")}, wantErr: "ssl.keystore.password: set, but ssl.keystore.location is not"},
		{name: "key without chain", s: Settings{SSLKeystoreKey: secret.New(p.clientKeyPEM)}, wantErr: "must be set together"},
		{name: "damaged encrypted key", s: Settings{SSLKeystoreKey: secret.New(encrypted), SSLKeystoreCertificateChain: p.clientCertPEM, SSLKeyPassword: secret.New("pw")}, wantErr: "ssl.keystore.key: encrypted private key: "},
		{name: "encrypted key without password", s: Settings{SSLKeystoreKey: secret.New(encrypted), SSLKeystoreCertificateChain: p.clientCertPEM}, wantErr: "ssl.key.password: required: the private key in ssl.keystore.key is encrypted"},
		{name: "legacy encrypted key", s: Settings{SSLKeystoreKey: secret.New(legacy), SSLKeystoreCertificateChain: p.clientCertPEM, SSLKeyPassword: secret.New("pw")}, wantErr: "legacy OpenSSL-encrypted keys (Proc-Type: 4,ENCRYPTED) are not supported"},
		{name: "unencrypted key with key password", s: Settings{SSLKeystoreKey: secret.New(p.clientKeyPEM), SSLKeystoreCertificateChain: p.clientCertPEM, SSLKeyPassword: secret.New("pw")}, wantErr: "ssl.key.password: set, but the private key in ssl.keystore.key is not encrypted"},
		{name: "key password without key", s: Settings{SSLKeyPassword: secret.New("pw")}, wantErr: "ssl.key.password: set, but there is no client key"},
		{name: "key does not match cert", s: Settings{SSLKeystoreKey: secret.New(otherKey), SSLKeystoreCertificateChain: p.clientCertPEM}, wantErr: "the first certificate does not belong to the private key"},
		{name: "unknown identification algorithm", s: Settings{SSLEndpointIdentificationAlgorithm: "ldaps"}, wantErr: `unknown value "ldaps"`},
	} {
		t.Run(test.name, func(t *testing.T) {
			_, err := TLSConfig(test.s)
			if err == nil {
				t.Fatalf("no error, want %q", test.wantErr)
			}
			if !strings.Contains(err.Error(), test.wantErr) {
				t.Errorf("error %q does not contain %q", err, test.wantErr)
			}
			if strings.Contains(err.Error(), keyMarker) || strings.Contains(strings.ReplaceAll(err.Error(), "password", ""), "pw") {
				t.Errorf("error %q contains key material", err)
			}
		})
	}
	_, err := TLSConfig(Settings{SSLTruststoreLocation: filepath.Join(p.dir, "nope.pem")})
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a missing file error does not wrap os.ErrNotExist: %v", err)
	}
}
