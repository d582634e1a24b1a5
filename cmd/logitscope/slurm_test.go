package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"logitscope/internal/sys/prereq"
)

// slurmCluster starts a single-node Slurm on this machine for the test:
// munged, slurmctld and slurmd on their own key, socket, ports and state
// directory, stopped when the test ends. It returns the environment that
// points Slurm's commands at it.
func slurmCluster(t *testing.T) []string {
	t.Helper()
	for _, bin := range []string{"munged", "slurmctld", "slurmd", "sbatch"} {
		if _, err := exec.LookPath(bin); err != nil {
			prereq.Missing(t, prereq.Slurm, fmt.Sprintf("no %s: apt-get install slurm-wlm munge", bin))
		}
	}
	if os.Geteuid() != 0 {
		prereq.Missing(t, prereq.Slurm, "the single-node Slurm runs its daemons as root")
	}
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	// A short directory: munge's socket path must fit a sockaddr_un.
	dir, err := os.MkdirTemp("", "slurm")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	key := make([]byte, 1024)
	for i := range key {
		key[i] = byte(i*7919 + time.Now().Nanosecond())
	}
	if err := os.WriteFile(filepath.Join(dir, "munge.key"), key, 0o400); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "munge.sock")
	conf := filepath.Join(dir, "slurm.conf")
	port := 20000 + os.Getpid()%20000
	os.WriteFile(conf, []byte(fmt.Sprintf(`ClusterName=logitscope
SlurmctldHost=%[1]s
SlurmUser=root
SlurmdUser=root
SlurmctldPort=%[3]d
SlurmdPort=%[4]d
AuthType=auth/munge
AuthInfo=socket=%[2]s/munge.sock
StateSaveLocation=%[2]s/state
SlurmdSpoolDir=%[2]s/spool
SlurmctldPidFile=%[2]s/slurmctld.pid
SlurmdPidFile=%[2]s/slurmd.pid
SlurmctldLogFile=%[2]s/slurmctld.log
SlurmdLogFile=%[2]s/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
MpiDefault=none
NodeName=%[1]s CPUs=%[5]d State=UNKNOWN
PartitionName=main Nodes=ALL Default=YES MaxTime=INFINITE State=UP
`, host, dir, port, port+1, runtime.NumCPU())), 0o644)
	for _, d := range []string{"state", "spool"} {
		os.Mkdir(filepath.Join(dir, d), 0o755)
	}
	env := append(os.Environ(), "SLURM_CONF="+conf)
	start := func(name string, args ...string) {
		cmd := exec.Command(name, args...)
		cmd.Env = env
		if out, err := cmd.CombinedOutput(); err != nil {
			logs, _ := exec.Command("sh", "-c", "tail -n 20 "+dir+"/*.log").CombinedOutput()
			t.Fatalf("%s: %v\n%s\n%s", name, err, out, logs)
		}
	}
	start("munged", "--force", "--socket="+sock, "--pid-file="+dir+"/munged.pid", "--log-file="+dir+"/munged.log",
		"--key-file="+dir+"/munge.key", "--seed-file="+dir+"/munge.seed")
	t.Cleanup(func() { kill(dir + "/munged.pid") })
	start("slurmctld", "-f", conf)
	t.Cleanup(func() { kill(dir + "/slurmctld.pid") })
	start("slurmd", "-f", conf)
	t.Cleanup(func() { kill(dir + "/slurmd.pid") })
	// The node registers within seconds.
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(500 * time.Millisecond) {
		cmd := exec.Command("sinfo", "-h", "-o", "%t")
		cmd.Env = env
		out, _ := cmd.Output()
		if s := strings.TrimSpace(string(out)); s == "idle" || s == "mix" {
			break
		}
		if time.Now().After(deadline) {
			logs, _ := exec.Command("sh", "-c", "tail -n 20 "+dir+"/*.log").CombinedOutput()
			t.Fatalf("the node did not come up (sinfo: %q)\n%s", out, logs)
		}
	}
	return env
}

func kill(pidFile string) {
	if b, err := os.ReadFile(pidFile); err == nil {
		var pid int
		if _, err := fmt.Sscan(string(b), &pid); err == nil {
			if p, err := os.FindProcess(pid); err == nil {
				p.Kill()
			}
		}
	}
}

// The shipped sbatch scripts on a real single-node Slurm: a job array of
// three capture shards per side, then a report job that depends on both
// arrays; its report equals the report of the same panel captured in one
// process.
func TestSlurmJobArray(t *testing.T) {
	env := slurmCluster(t)
	dir := quantized(t)
	panel := panelFile(t)
	out := t.TempDir()
	bin := filepath.Join(out, "logitscope")
	if b, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, b)
	}
	env = append(env, "LOGITSCOPE="+bin)
	sbatch := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("sbatch", append([]string{"--parsable", "--chdir", out}, args...)...)
		cmd.Env = env
		b, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("sbatch %v: %v\n%s", args, err, b)
		}
		return strings.TrimSpace(string(b))
	}
	var jobs []string
	for _, v := range []string{"f32", "q4"} {
		jobs = append(jobs, sbatch("--array=0-2", "cluster/capture.sbatch", dir, v, panel, filepath.Join(out, v),
			"--device", "cpu", "--runtime", "native", "--window", "64"))
	}
	// The scripts are found from the test's directory; Slurm copies them.
	report := filepath.Join(out, "report.json")
	sbatch("--wait", "--dependency=afterok:"+strings.Join(jobs, ":"), "cluster/report.sbatch",
		filepath.Join(out, "f32"), filepath.Join(out, "q4"), report)
	got, err := os.ReadFile(report)
	if err != nil {
		logs, _ := exec.Command("sh", "-c", "tail -n 20 "+out+"/*.log").CombinedOutput()
		t.Fatalf("%v\n%s", err, logs)
	}
	for _, v := range []string{"f32", "q4"} {
		if _, err := run(t, captureCmd, "--model", dir, "--device", "cpu", "--runtime", "native", "--variant", v,
			"--panel", panel, "--window", "64", "--out", filepath.Join(out, "whole-"+v)); err != nil {
			t.Fatal(err)
		}
	}
	want, err := run(t, reportCmd, "--ref", filepath.Join(out, "whole-f32"), "--test", filepath.Join(out, "whole-q4"), "--json")
	if err != nil {
		t.Fatal(err)
	}
	// The inputs' names and receipts differ (three shards against one
	// directory, and the receipts' chains hold "rows" of their own);
	// everything after them is the same.
	body := func(s string) string { _, b, _ := strings.Cut(s, `"same_model":`); return b }
	if body(string(got)) != body(want) || !strings.Contains(string(got), `"shard": "3/3"`) {
		t.Fatalf("the Slurm report differs from the one-process report:\n%.2000s", got)
	}
}
