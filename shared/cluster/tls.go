package cluster

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"strings"
)

// TLSConfig returns the TLS configuration for s (whose protocol is SSL or
// SASL_SSL): TLS 1.2 or newer; the system roots plus the CA certificates of
// ssl.truststore.location or ssl.truststore.certificates; a client
// certificate from ssl.keystore.location or ssl.keystore.key +
// ssl.keystore.certificate.chain (PEM only); and host name verification
// unless ssl.endpoint.identification.algorithm is empty, in which case the
// certificate chain is still verified but the name in it is not.
//
// franz-go clones the config per connection and sets ServerName to the
// dialed host, so it is left empty here.
func TLSConfig(s Settings) (*tls.Config, error) {
	roots, err := x509.SystemCertPool()
	if err != nil || roots == nil {
		roots = x509.NewCertPool()
	}
	var caPEM []byte
	var caName string
	switch {
	case s.SSLTruststoreLocation != "":
		caName = "ssl.truststore.location"
		caPEM, err = os.ReadFile(s.SSLTruststoreLocation)
		if err != nil {
			return nil, propErr("ssl.truststore.location", err)
		}
	case s.SSLTruststoreCertificates != "":
		caName = "ssl.truststore.certificates"
		caPEM = []byte(s.SSLTruststoreCertificates)
	}
	if caName != "" {
		certs, _, err := pemBlocks(caPEM)
		if err != nil {
			return nil, propErr(caName, err)
		}
		if len(certs) == 0 {
			return nil, propErr(caName, errors.New("no PEM CERTIFICATE block found (only PEM is supported; convert JKS/PKCS12 with keytool/openssl)"))
		}
		for i, c := range certs {
			cert, err := x509.ParseCertificate(c.Bytes)
			if err != nil {
				return nil, propErr(caName, fmt.Errorf("certificate %d: %w", i+1, err))
			}
			roots.AddCert(cert)
		}
	}

	cfg := &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: roots}

	cert, ok, err := clientCertificate(s)
	if err != nil {
		return nil, err
	}
	if ok {
		cfg.Certificates = []tls.Certificate{cert}
	}

	switch strings.ToLower(strings.TrimSpace(s.SSLEndpointIdentificationAlgorithm)) {
	case "https":
	case "":
		// Kafka's ssl.endpoint.identification.algorithm= (empty): trust the
		// chain, not the name. Go can only skip both checks, so the chain is
		// verified again by hand below.
		cfg.InsecureSkipVerify = true //nolint:gosec // the chain is verified in VerifyConnection
		cfg.VerifyConnection = func(cs tls.ConnectionState) error {
			return verifyChain(cs, roots)
		}
	default:
		return nil, propErr("ssl.endpoint.identification.algorithm", fmt.Errorf("unknown value %q (want https, or empty to disable host name verification)", s.SSLEndpointIdentificationAlgorithm))
	}
	return cfg, nil
}

// verifyChain verifies the peer's certificate chain against roots without
// checking the host name.
func verifyChain(cs tls.ConnectionState, roots *x509.CertPool) error {
	if len(cs.PeerCertificates) == 0 {
		return errors.New("broker sent no TLS certificate")
	}
	opts := x509.VerifyOptions{Roots: roots, Intermediates: x509.NewCertPool()}
	for _, c := range cs.PeerCertificates[1:] {
		opts.Intermediates.AddCert(c)
	}
	_, err := cs.PeerCertificates[0].Verify(opts)
	return err
}

// clientCertificate returns the mutual-TLS client certificate, if any.
// Errors never contain key material.
func clientCertificate(s Settings) (tls.Certificate, bool, error) {
	var certs []*pem.Block
	var key *pem.Block
	var name string
	switch {
	case s.SSLKeystoreLocation != "":
		name = "ssl.keystore.location"
		b, err := os.ReadFile(s.SSLKeystoreLocation)
		if err != nil {
			return tls.Certificate{}, false, propErr(name, err)
		}
		var keys []*pem.Block
		certs, keys, err = pemBlocks(b)
		if err != nil {
			return tls.Certificate{}, false, propErr(name, err)
		}
		if len(keys) != 1 {
			return tls.Certificate{}, false, propErr(name, fmt.Errorf("want exactly one PEM private key block, found %d (only PEM is supported; convert JKS/PKCS12 with keytool/openssl)", len(keys)))
		}
		key = keys[0]
	case s.SSLKeystoreKey.IsSet() || s.SSLKeystoreCertificateChain != "":
		name = "ssl.keystore.key"
		if !s.SSLKeystoreKey.IsSet() || s.SSLKeystoreCertificateChain == "" {
			return tls.Certificate{}, false, propErr("ssl.keystore.certificate.chain", errors.New("ssl.keystore.key and ssl.keystore.certificate.chain must be set together"))
		}
		_, keys, err := pemBlocks([]byte(s.SSLKeystoreKey.Reveal()))
		if err != nil {
			return tls.Certificate{}, false, propErr(name, err)
		}
		if len(keys) != 1 {
			return tls.Certificate{}, false, propErr(name, fmt.Errorf("want exactly one PEM private key block, found %d", len(keys)))
		}
		key = keys[0]
		certs, _, err = pemBlocks([]byte(s.SSLKeystoreCertificateChain))
		if err != nil {
			return tls.Certificate{}, false, propErr("ssl.keystore.certificate.chain", err)
		}
	default:
		if s.SSLKeyPassword.IsSet() {
			return tls.Certificate{}, false, propErr("ssl.key.password", errors.New("set, but there is no client key (ssl.keystore.location or ssl.keystore.key)"))
		}
		return tls.Certificate{}, false, nil
	}
	if len(certs) == 0 {
		return tls.Certificate{}, false, propErr(name, errors.New("no PEM CERTIFICATE block for the client key"))
	}
	if strings.Contains(key.Type, "ENCRYPTED") || key.Headers["Proc-Type"] != "" {
		return tls.Certificate{}, false, propErr(name, errors.New("encrypted private keys (ssl.key.password) are not supported: store the key unencrypted, e.g. openssl pkcs8 -topk8 -nocrypt"))
	}
	if s.SSLKeyPassword.IsSet() {
		return tls.Certificate{}, false, propErr("ssl.key.password", fmt.Errorf("set, but %s holds an unencrypted key; unset it", name))
	}
	var certPEM []byte
	for _, c := range certs {
		certPEM = append(certPEM, pem.EncodeToMemory(c)...)
	}
	cert, err := tls.X509KeyPair(certPEM, pem.EncodeToMemory(key))
	if err != nil {
		// X509KeyPair's errors describe the mismatch, not the key.
		return tls.Certificate{}, false, propErr(name, fmt.Errorf("client certificate and key: %w", err))
	}
	return cert, true, nil
}

// pemBlocks splits PEM data into certificates and private keys. Other block
// types are an error; so is non-PEM data (a JKS or PKCS12 store).
func pemBlocks(b []byte) (certs, keys []*pem.Block, err error) {
	rest := b
	for {
		var blk *pem.Block
		blk, rest = pem.Decode(rest)
		if blk == nil {
			break
		}
		switch {
		case blk.Type == "CERTIFICATE":
			certs = append(certs, blk)
		case strings.HasSuffix(blk.Type, "PRIVATE KEY"):
			keys = append(keys, blk)
		default:
			return nil, nil, fmt.Errorf("unexpected PEM block type %q", blk.Type)
		}
	}
	if len(certs) == 0 && len(keys) == 0 {
		return nil, nil, errors.New("not PEM data (only PEM is supported; convert JKS/PKCS12 with keytool/openssl)")
	}
	return certs, keys, nil
}
