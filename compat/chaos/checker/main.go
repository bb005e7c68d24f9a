// Command checker reads the register operations of a chaos run (JSON lines written by
// compat/chaos/run.mjs) and checks them for linearizability with Porcupine, one register
// at a time. A failed write was never applied, so it is left out; an indeterminate write
// (no answer, or "may or may not have been applied") may have happened at any time after
// its invocation, so its return time is infinity; reads without an answer say nothing and
// are left out. It writes a JSON verdict to -out and, when a register is not
// linearizable (or the check timed out), Porcupine's visualization to -html.
// Exit status: 0 linearizable, 1 not linearizable, 2 unknown (timed out), 3 bad input.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"sort"
	"time"

	"github.com/anishathalye/porcupine"
)

// op is one line of the history: the fields of run.mjs's register operations.
type op struct {
	Kind     string          `json:"kind"` // "reg-write" or "reg-read"
	Process  int             `json:"process"`
	Db       string          `json:"db"`
	Key      string          `json:"key"`
	Value    json.RawMessage `json:"value"` // written value; read value (null: absent); a string for registers
	Invoke   int64           `json:"invoke"`
	Complete *int64          `json:"complete"`
	Outcome  string          `json:"outcome"` // ok, failed, indeterminate
	Node     string          `json:"node"`
}

type regInput struct {
	Write bool
	Value string
}

const absent = "<absent>"

func model() porcupine.Model {
	return porcupine.Model{
		Init: func() interface{} { return absent },
		Step: func(state, input, output interface{}) (bool, interface{}) {
			in := input.(regInput)
			if in.Write {
				return true, in.Value
			}
			return output.(string) == state.(string), state
		},
		Equal: func(a, b interface{}) bool { return a.(string) == b.(string) },
		DescribeOperation: func(input, output interface{}) string {
			in := input.(regInput)
			if in.Write {
				return fmt.Sprintf("write(%s)", in.Value)
			}
			return fmt.Sprintf("read() -> %s", output.(string))
		},
		DescribeState: func(state interface{}) string { return state.(string) },
	}
}

type keyVerdict struct {
	Register      string `json:"register"`
	Result        string `json:"result"`
	Operations    int    `json:"operations"`
	Writes        int    `json:"writes"`
	Indeterminate int    `json:"indeterminateWrites"`
	Reads         int    `json:"reads"`
	Html          string `json:"html,omitempty"`
}

func main() {
	in := flag.String("history", "", "history.jsonl")
	out := flag.String("out", "", "verdict JSON (stdout if empty)")
	htmlPrefix := flag.String("html", "", "visualization path prefix (one file per bad register)")
	timeout := flag.Duration("timeout", 60*time.Second, "per-register check timeout")
	flag.Parse()
	f, err := os.Open(*in)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	byKey := map[string][]porcupine.Operation{}
	stats := map[string]*keyVerdict{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var o op
		if err := json.Unmarshal(sc.Bytes(), &o); err != nil {
			fmt.Fprintln(os.Stderr, "bad line:", err)
			os.Exit(3)
		}
		if o.Kind != "reg-write" && o.Kind != "reg-read" {
			continue
		}
		reg := o.Db + "/" + o.Key
		st := stats[reg]
		if st == nil {
			st = &keyVerdict{Register: reg}
			stats[reg] = st
		}
		value := absent
		if len(o.Value) > 0 && string(o.Value) != "null" {
			var v string
			if err := json.Unmarshal(o.Value, &v); err != nil {
				fmt.Fprintln(os.Stderr, "a register value that is not a string:", string(o.Value))
				os.Exit(3)
			}
			value = v
		}
		ret := int64(math.MaxInt64)
		if o.Complete != nil && o.Outcome == "ok" {
			ret = *o.Complete
		}
		switch {
		case o.Kind == "reg-write" && o.Outcome == "failed":
			continue
		case o.Kind == "reg-write":
			if o.Outcome != "ok" {
				st.Indeterminate++
				ret = math.MaxInt64
			}
			st.Writes++
			byKey[reg] = append(byKey[reg], porcupine.Operation{ClientId: o.Process,
				Input: regInput{Write: true, Value: value}, Call: o.Invoke, Output: "", Return: ret})
		default:
			if o.Outcome != "ok" {
				continue
			}
			st.Reads++
			byKey[reg] = append(byKey[reg], porcupine.Operation{ClientId: o.Process,
				Input: regInput{Write: false}, Call: o.Invoke, Output: value, Return: ret})
		}
	}
	if err := sc.Err(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	keys := make([]string, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	worst := porcupine.Ok
	verdicts := []keyVerdict{}
	for i, k := range keys {
		ops := byKey[k]
		res, info := porcupine.CheckOperationsVerbose(model(), ops, *timeout)
		st := stats[k]
		st.Operations = len(ops)
		st.Result = string(res)
		if res != porcupine.Ok && *htmlPrefix != "" {
			path := fmt.Sprintf("%s-%d.html", *htmlPrefix, i)
			if err := porcupine.VisualizePath(model(), info, path); err == nil {
				st.Html = path
			}
		}
		if res == porcupine.Illegal || (res == porcupine.Unknown && worst == porcupine.Ok) {
			worst = res
		}
		verdicts = append(verdicts, *st)
		fmt.Fprintf(os.Stderr, "register %s: %s (%d operations)\n", k, res, len(ops))
	}
	doc, _ := json.MarshalIndent(map[string]interface{}{"linearizable": string(worst), "registers": verdicts}, "", "  ")
	if *out == "" {
		os.Stdout.Write(append(doc, '\n'))
	} else if err := os.WriteFile(*out, append(doc, '\n'), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	switch worst {
	case porcupine.Illegal:
		os.Exit(1)
	case porcupine.Unknown:
		os.Exit(2)
	}
}
