package api

import (
	"bytes"
	"encoding/json"
	"flag"
	"hash/fnv"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/edgeagent/agent/state"
)

var updateGolden = flag.Bool("update", false, "write testdata/*.golden.json from the code rather than check it")

// filled sets every field of v, however deep, to a value of its own (its
// path in the struct, or a number drawn from it), so that no field of a
// task can be left out of its wire JSON unseen: the golden file then
// lists them all. A field added or removed changes no other's value.
func filled(v reflect.Value, path string) {
	h := fnv.New32a()
	h.Write([]byte(path))
	n := int(h.Sum32() % 100000)
	switch v.Kind() {
	case reflect.String:
		v.SetString(path)
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if v.Type() == reflect.TypeFor[time.Duration]() || v.Type() == reflect.TypeFor[state.Duration]() {
			v.SetInt(int64(n) * int64(time.Second))
			return
		}
		v.SetInt(int64(n))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(uint64(n))
	case reflect.Float32, reflect.Float64:
		v.SetFloat(float64(n) + 0.5)
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		filled(p.Elem(), path)
		v.Set(p)
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 1, 1)
		filled(s.Index(0), path+"[0]")
		v.Set(s)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		filled(k, path+".key")
		filled(e, path+".value")
		m.SetMapIndex(k, e)
		v.Set(m)
	case reflect.Interface:
		v.Set(reflect.ValueOf(path))
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[time.Time]() {
			v.Set(reflect.ValueOf(time.Date(2026, 11, 28, 4, 0, 0, 0, time.UTC).Add(time.Duration(n) * time.Minute)))
			return
		}
		for i := range v.NumField() {
			if f := v.Type().Field(i); f.IsExported() {
				filled(v.Field(i), path+"."+f.Name)
			}
		}
	}
}

// fullTask is a task with every field set, the domain's closed sets to
// values of their own: what the golden file holds is the shape, not a
// task that could happen.
func fullTask() *state.Task {
	var t state.Task
	filled(reflect.ValueOf(&t).Elem(), "task")
	return &t
}

// A task's wire JSON (GET /v1/tasks/{id}, the pages, every answer that
// shows a task) is a file format that agents, scripts and other control
// planes read: every key, its spelling and its place stay as they are.
// The golden file was written by the code from before the wire type had
// a struct of its own (api.TaskView embedding state.Task).
func TestTaskViewWireJSONStaysTheSame(t *testing.T) {
	v := ViewOf(fullTask())
	got, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "taskview.golden.json")
	if *updateGolden {
		if err := os.WriteFile(golden, append(got, '\n'), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(append(got, '\n'), want) {
		t.Errorf("a task's wire JSON changed; want %s, got:\n%s", golden, got)
	}
}

// Every field of the domain's task goes on the wire and comes back: a
// field added to state.Task and not to TaskView fails here.
func TestTaskViewCarriesEveryFieldOfTheTask(t *testing.T) {
	task := fullTask()
	v := ViewOf(task)
	if back := v.Task(); !reflect.DeepEqual(back, task) {
		t.Errorf("the task back from its view differs:\n got %+v\nwant %+v", back, task)
	}
	var decoded TaskView
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &decoded); err != nil {
		t.Fatal(err)
	}
	if back := decoded.Task(); !reflect.DeepEqual(back, task) {
		t.Errorf("the task decoded from the wire differs:\n got %+v\nwant %+v", back, task)
	}
}
