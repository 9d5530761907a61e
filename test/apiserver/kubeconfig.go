package apiserver

import (
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// WriteKubeconfig writes a kubeconfig for the server's admin identity to
// path, for binaries under test (CNI plugins, CLIs).
func (s *Server) WriteKubeconfig(path string) error {
	c := s.Config()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["test"] = &clientcmdapi.Cluster{Server: c.Host, CertificateAuthority: c.CAFile}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificate: c.CertFile, ClientKey: c.KeyFile}
	cfg.Contexts["test"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: "admin"}
	cfg.CurrentContext = "test"
	return clientcmd.WriteToFile(*cfg, path)
}
