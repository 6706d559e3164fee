package config

import (
	"reflect"
	"testing"
)

func TestWalkNested(t *testing.T) {
	type inner struct {
		Auth string `envconfig:"AUTH" mm2:"auth" default:"off"`
	}
	type clusterLike struct {
		Bootstrap string `envconfig:"BOOTSTRAP_SERVERS" mm2:"bootstrap.servers"`
		Azure     inner  `envconfig:"AZURE" mm2:"azure"`
	}
	type spec struct {
		Source clusterLike `envconfig:"MM2_SOURCE" role:"source"`
	}
	var s spec
	got := walk(reflect.ValueOf(&s).Elem(), "", "", "", nil)
	if len(got) != 2 || got[1].env != "MM2_SOURCE_AZURE_AUTH" || got[1].prop != "azure.auth" || got[1].scope != "cluster" || got[1].role != "source" {
		t.Errorf("%+v", got)
	}
}
