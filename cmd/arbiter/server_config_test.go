package main

import (
	"reflect"
	"testing"

	"github.com/arbiterhq/arbiter/config"
)

// TestAgentConfig_CopiesEverySetting hands agent.New every verifier setting
// config reads, including ones added later: each field of config.Agent
// arrives in the agent.Config field of the same name.
func TestAgentConfig_CopiesEverySetting(t *testing.T) {
	var in config.Agent
	v := reflect.ValueOf(&in).Elem()
	for i := range v.NumField() {
		switch f := v.Field(i); f.Kind() {
		case reflect.String:
			f.SetString(v.Type().Field(i).Name + "-value")
		case reflect.Float64:
			f.SetFloat(float64(i) + 0.5)
		default:
			t.Fatalf("config.Agent.%s is a %s: teach this test to fill it", v.Type().Field(i).Name, f.Kind())
		}
	}
	out := reflect.ValueOf(agentConfig(in))
	for i := range v.NumField() {
		name := v.Type().Field(i).Name
		got := out.FieldByName(name)
		if !got.IsValid() {
			t.Errorf("agent.Config has no field %s", name)
			continue
		}
		if !reflect.DeepEqual(got.Interface(), v.Field(i).Interface()) {
			t.Errorf("agent.Config.%s = %v, want %v", name, got.Interface(), v.Field(i).Interface())
		}
	}
}
