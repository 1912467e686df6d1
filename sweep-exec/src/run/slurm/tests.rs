//! The batch script, option checks, Slurm output parsing and job folders.

use super::script::script_args;
use super::*;
use crate::run::tests::repo_plan;
use std::process::Command;

fn cfg() -> SlurmConfig {
    SlurmConfig { inner_target: crate::run::Target::Sim, poll_s: 2.0, max_jobs: 8, ..Default::default() }
}

#[test]
fn script_has_only_validated_directives_and_runs_its_arguments() {
    let s = batch_script(&cfg()).unwrap();
    assert!(s.starts_with("#!/bin/bash\n"));
    assert!(s.ends_with("exec \"$@\"\n"), "{s}");
    assert!(!s.contains("--partition") && !s.contains("--gpus-per-node") && !s.contains("--time"), "{s}");
    let c = SlurmConfig {
        partition: Some("gpu".into()),
        account: Some("perf-team".into()),
        time: Some("1-02:00:00".into()),
        gpus_per_node: Some(4),
        sbatch: vec!["--exclusive".into(), "#SBATCH --qos=high".into()],
        ..cfg()
    };
    let s = batch_script(&c).unwrap();
    for l in [
        "#SBATCH --partition=gpu\n",
        "#SBATCH --account=perf-team\n",
        "#SBATCH --time=1-02:00:00\n",
        "#SBATCH --gpus-per-node=4\n",
        "#SBATCH --exclusive\n",
        "#SBATCH --qos=high\n",
    ] {
        assert!(s.contains(l), "missing {l:?} in\n{s}");
    }
    // Directives come before the first command, or sbatch ignores them.
    let first_cmd = s.find("set -euo").unwrap();
    assert!(s.rfind("#SBATCH").unwrap() < first_cmd);
}

#[test]
fn bad_options_are_refused_with_the_flag_and_the_fix() {
    let e = batch_script(&SlurmConfig { partition: Some("gpu\n#SBATCH --x".into()), ..cfg() }).unwrap_err();
    assert!(e.to_string().contains("--slurm-partition"), "{e}");
    let e = batch_script(&SlurmConfig { sbatch: vec!["--qos=a\nrm -rf /".into()], ..cfg() }).unwrap_err();
    assert!(e.to_string().contains("line break"), "{e}");
    let e = batch_script(&SlurmConfig { sbatch: vec!["qos=a".into()], ..cfg() }).unwrap_err();
    assert!(e.to_string().contains("--qos=high"), "{e}");
    for t in ["1h", "", "1:2:3:4", "-5", "$(x)"] {
        assert!(batch_script(&SlurmConfig { time: Some(t.into()), ..cfg() }).is_err(), "{t}");
    }
    for t in ["1", "90", "1:30", "01:00:00", "2-00", "2-12:00:00", "UNLIMITED"] {
        assert!(batch_script(&SlurmConfig { time: Some(t.into()), ..cfg() }).is_ok(), "{t}");
    }
    assert!(mount_path(Path::new("/a,b")).is_err());
    assert_eq!(mount_path(Path::new("/scratch/run")).unwrap(), "/scratch/run:/scratch/run");
}

#[test]
fn container_script_takes_image_and_mounts_as_arguments() {
    let s = batch_script(&SlurmConfig { container_image: Some("lmsysorg/sglang:v0.5.5-cu129-amd64".into()), ..cfg() }).unwrap();
    assert!(s.contains("image=\"$1\"\nmounts=\"$2\"\nshift 2\n"), "{s}");
    assert!(s.contains("srun --ntasks=1 --container-image=\"$image\" --container-mounts=\"$mounts\""), "{s}");
    assert!(!s.contains("lmsysorg"), "the image never appears in script text");
}

#[test]
fn a_hostile_argument_passes_through_the_script_inert() {
    // The script as a job runs it, with hostile values as arguments: printed back verbatim,
    // nothing executed.
    let d = tempfile::tempdir().unwrap();
    let script = d.path().join("job.sh");
    std::fs::write(&script, batch_script(&cfg()).unwrap()).unwrap();
    let marker = d.path().join("pwned");
    let hostile = [
        format!("$(touch {})", marker.display()),
        format!("`touch {}`", marker.display()),
        format!("a'b\"c; touch {}", marker.display()),
        format!("line1\nline2 $(touch {})", marker.display()),
    ];
    let o = Command::new("bash").arg(&script).args(["printf", "%s\\0"]).args(&hostile).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let got: Vec<String> = String::from_utf8(o.stdout).unwrap().split('\0').filter(|s| !s.is_empty()).map(str::to_string).collect();
    assert_eq!(got, hostile);
    assert!(!marker.exists(), "a value was executed");
}

#[test]
fn squeue_and_scontrol_output_parse() {
    let m = parse_squeue("12|RUNNING|None|node1\n13|PENDING|Resources|\n14|COMPLETING+|None|n2\n");
    assert_eq!(m["12"].state, "RUNNING");
    assert_eq!(m["12"].nodes, "node1");
    assert_eq!(m["13"].reason, "Resources");
    assert_eq!(m["14"].state, "COMPLETING");
    let line = "JobId=17 JobName=sweep-x UserId=root(0) JobState=TIMEOUT Reason=TimeLimit Dependency=(null) \
                ExitCode=0:15 RunTime=00:01:03 TimeLimit=00:01:00 NodeList=vm Command=/a b";
    let i = parse_scontrol(line).unwrap();
    assert_eq!((i.state.as_str(), i.reason.as_str(), i.time_limit.as_str(), i.nodes.as_str()), ("TIMEOUT", "TimeLimit", "00:01:00", "vm"));
    assert!(is_terminal(&i.state) && !is_terminal("PENDING") && !is_terminal("COMPLETING"));
    let r = killed_reason("17", &i);
    assert!(r.contains("TIMEOUT") && r.contains("time limit (00:01:00)") && r.contains("TimeLimit"), "{r}");
    let nf = killed_reason("18", &JobInfo { state: "NODE_FAIL".into(), nodes: "gpu3".into(), ..Default::default() });
    assert!(nf.contains("node failure on gpu3"), "{nf}");
    assert!(parse_scontrol("slurm_load_jobs error: Invalid job id specified").is_none());
    let a = parse_sacct("4711|TIMEOUT|0:0|01:00:00|gpu3|TimeLimit\n", "4711").unwrap();
    assert_eq!((a.state.as_str(), a.time_limit.as_str(), a.nodes.as_str()), ("TIMEOUT", "01:00:00", "gpu3"));
    assert_eq!(parse_sacct("12|CANCELLED by 0|0:15|UNLIMITED|n1|None", "12").unwrap().state, "CANCELLED");
    // Without accounting storage sacct answers with a message, not a job.
    assert!(parse_sacct("Slurm accounting storage is disabled", "12").is_none());
}

#[test]
fn container_arguments_carry_the_recipe_image_and_the_mounts() {
    let plan = repo_plan();
    let p = plan.canary.as_ref().unwrap();
    let pinned = p.row["image"].as_str().unwrap().to_string();
    let inner = vec!["/opt/sweep".to_string(), "run".into(), "full-sweep-fail-fast".into()];
    let mounts = vec!["/scratch/run:/scratch/run".to_string(), "/repo:/repo".into()];
    let out = Path::new("/scratch/run/000/run");
    let c = SlurmConfig { container_image: Some("recipe".into()), ..cfg() };
    let a = script_args(&c, &mounts, &inner, p, out).unwrap();
    assert_eq!(a[0], pinned);
    assert_eq!(a[1], "/scratch/run:/scratch/run,/repo:/repo");
    assert_eq!(&a[2..5], &inner[..]);
    assert_eq!(&a[5..], &["--point".to_string(), p.id.clone(), "--out".into(), "/scratch/run/000/run".into()]);
    let c = SlurmConfig { container_image: Some("registry.local/sglang:test".into()), ..cfg() };
    assert_eq!(script_args(&c, &mounts, &inner, p, out).unwrap()[0], "registry.local/sglang:test");
    // Without a container the script's arguments are the sweep command line alone.
    let a = script_args(&cfg(), &mounts, &inner, p, out).unwrap();
    assert_eq!(a[0], "/opt/sweep");
    let mut unpinned = p.clone();
    unpinned.row.remove("image");
    let e = script_args(&SlurmConfig { container_image: Some("recipe".into()), ..cfg() }, &mounts, &inner, &unpinned, out).unwrap_err();
    assert!(e.to_string().contains("pins no image"), "{e}");
}

#[test]
fn job_folders_are_unique_and_filesystem_safe() {
    assert_eq!(job_folder(3, "cfg-a/tp4-c16"), "003-cfg-a_tp4-c16");
    assert_eq!(job_folder(12, "x:y/$(z)"), "012-x_y___z_");
}
