use super::*;
use crate::recipe::master::{Conc, Master};

fn s(v: &[&str]) -> Vec<String> {
    v.iter().map(|x| x.to_string()).collect()
}

#[test]
fn merge_replaces_flag_values_in_place() {
    let mut a = s(&["--tp", "4", "--trust-remote-code", "--mem-fraction-static", "0.8"]);
    merge_args(&mut a, &s(&["--mem-fraction-static", "0.85", "--enable-dp-attention", "--x=1"]));
    assert_eq!(a, s(&["--tp", "4", "--trust-remote-code", "--mem-fraction-static", "0.85", "--enable-dp-attention", "--x", "1"]));
}

#[test]
fn ladder_doubles_and_clamps() {
    assert_eq!(expand_concs(&Conc::Range { start: 1, end: 6 }), vec![1, 2, 4, 6]);
    assert_eq!(expand_concs(&Conc::Range { start: 4, end: 4 }), vec![4]);
    assert_eq!(expand_concs(&Conc::List(vec![8, 4, 8])), vec![8, 4, 8]);
}

#[test]
fn topology_from_flags_both_spellings() {
    assert_eq!(
        arg_topology(&s(&["--tp-size", "8", "--dp-size", "8", "--enable-dp-attention", "--ep-size", "8"])),
        ArgTopology { tp: 8, ep: 8, dp_attn: true }
    );
    assert_eq!(arg_topology(&s(&["--tensor-parallel-size", "4"])), ArgTopology { tp: 4, ep: 1, dp_attn: false });
}

#[test]
fn quoting_is_display_safe() {
    let words = s(&["a", "b c", "it's", "$HOME", "--x=\"q\""]);
    let quoted = shell_quote(&words);
    assert!(quoted.starts_with("a "), "{quoted}");
    assert_eq!(shlex::split(&quoted).unwrap(), words);
}

/// A config with 1k/1k (TP8 c4…16), 8k/1k (TP8 c4, TP4 c1…2) and an agentic block (TP8 c4).
const MASTER: &str = "\
k:
  image: img
  model: m
  model-prefix: p
  runner: cluster:h200
  precision: fp8
  framework: sglang
  multinode: false
  scenarios:
    fixed-seq-len:
    - isl: 1024
      osl: 1024
      search-space:
      - { tp: 8, conc-start: 4, conc-end: 16 }
    - isl: 8192
      osl: 1024
      search-space:
      - { tp: 8, conc-list: [4] }
      - { tp: 4, conc-start: 1, conc-end: 2 }
    agentic-coding:
    - search-space:
      - { tp: 8, ep: 1, kv-offloading: none, conc-list: [4] }
";

/// Arms per sequence length; the TP8 c4 point without a selector serves the agentic row.
const RECIPE: &str = "\
config-key: k
random-range-ratio: 0.5
worker:
  command: python3 -m sglang.launch_server
  args: [--tensor-parallel-size, \"8\", --max-running-requests, \"256\"]
arms:
  - name: TP8
    gpus: 8
    points:
      - conc: 4
  - name: TP8 1k1k
    seq-len: 1k1k
    args: [--max-running-requests, \"512\"]
    points:
      - conc: 4
      - conc: 8
      - conc: 16
        args: [--stream-interval, \"30\"]
  - name: TP4 8k1k
    seq-len: 8k1k
    gpus: 4
    args: [--tensor-parallel-size, \"4\"]
    points:
      - conc: 1
      - conc: 2
";

fn entry() -> crate::recipe::Entry {
    let m = Master::from_str(Path::new("recipes/master.yaml"), MASTER).unwrap_or_else(|e| panic!("{e}"));
    m.get("k").unwrap().clone()
}

fn recipe(text: &str) -> Recipe {
    Recipe::from_str(Path::new("recipes/k.yaml"), text).unwrap_or_else(|e| panic!("{e}"))
}

/// The recipe's errors against [`MASTER`], one string.
fn match_errors(text: &str) -> String {
    recipe(text).match_master(&entry()).expect_err("should not match").to_string()
}

#[test]
fn seq_len_selectors_pick_each_rows_point() {
    let r = recipe(RECIPE);
    assert_eq!(r.random_range_ratio, Some(0.5));
    assert_eq!((r.seq_len(0, 0), r.seq_len(1, 2), r.seq_len(2, 0)), (None, Some(SeqLen::new(1024, 1024)), Some(SeqLen::new(8192, 1024))));
    let map = r.match_master(&entry()).unwrap_or_else(|e| panic!("{e}"));
    // 1k/1k c4 goes to the selecting arm, not to the unselective TP8 c4 point.
    let want = [
        ((Block::Fixed(0), 0, 4), (1, 0)),
        ((Block::Fixed(0), 0, 8), (1, 1)),
        ((Block::Fixed(0), 0, 16), (1, 2)),
        ((Block::Fixed(1), 0, 4), (0, 0)),
        ((Block::Fixed(1), 1, 1), (2, 0)),
        ((Block::Fixed(1), 1, 2), (2, 1)),
        ((Block::Agentic(0), 0, 4), (0, 0)),
    ];
    assert_eq!(map, want.into_iter().collect::<PointMap>());
    let argv = |a, p| r.resolve(a, p, "p", None).unwrap().worker_argv.join(" ");
    assert_eq!(argv(0, 0), "python3 -m sglang.launch_server --tensor-parallel-size 8 --max-running-requests 256");
    assert_eq!(argv(1, 2), "python3 -m sglang.launch_server --tensor-parallel-size 8 --max-running-requests 512 --stream-interval 30");
    assert_eq!(argv(2, 1), "python3 -m sglang.launch_server --tensor-parallel-size 4 --max-running-requests 256");
}

#[test]
fn a_fixed_seq_len_row_without_a_point_is_named_with_its_sequence_length() {
    let err = match_errors(&RECIPE.replace("      - conc: 2\n", ""));
    assert!(
        err.contains("recipes/master.yaml:1: k.scenarios.fixed-seq-len[1].search-space[1]: 8k1k concurrency 2 has no point in the serving recipe recipes/k.yaml"),
        "{err}"
    );
    assert!(
        err.contains("fix: add `- conc: 2` to an arm whose flags give tp 4 ep 1 dp-attn false and whose `seq-len` is 8k1k or unset"),
        "{err}"
    );
}

#[test]
fn two_points_for_one_row_are_ambiguous_at_both_lines() {
    // Without its selector the 1k/1k arm's c4 competes with the TP8 arm's for every c4 row.
    let err = match_errors(&RECIPE.replace("    seq-len: 1k1k\n", ""));
    assert!(
        err.contains("recipes/k.yaml:14: arms[1].points[0]: master row k.scenarios.fixed-seq-len[0].search-space[0] 1k1k concurrency 4 matches two recipe points: this one and arms[0].points[0] (line 10)"),
        "{err}"
    );
    assert!(err.contains("fix: give the arms or points `seq-len` selectors that differ (this row needs `seq-len: 1k1k`)"), "{err}");
    assert!(err.contains("master row k.scenarios.agentic-coding[0].search-space[0] concurrency 4 matches two recipe points"), "{err}");
}

#[test]
fn a_selector_of_no_block_or_no_row_is_refused() {
    let err = match_errors(&RECIPE.replace("seq-len: 8k1k", "seq-len: 2k1k"));
    assert!(err.contains("recipes/k.yaml:24: arms[2].points[0]: no master search-space row of `k` has tp 4 ep 1 dp-attn false with concurrency 1 in a 2048_1024 block"), "{err}");
    assert!(err.contains("fix: `k` has no 2048_1024 block: use one of its sequence lengths (1k1k, 8k1k)"), "{err}");
    // A point's selector replaces its arm's: 1k/1k has no TP4 row.
    let err = match_errors(&RECIPE.replace("      - conc: 2\n", "      - conc: 2\n        seq-len: 1k1k\n"));
    assert!(
        err.contains("arms[2].points[1]: no master search-space row of `k` has tp 4 ep 1 dp-attn false with concurrency 2 in a 1k1k block"),
        "{err}"
    );
    assert!(err.contains("8k1k concurrency 2 has no point"), "{err}");
}

#[test]
fn selectors_and_range_ratio_are_checked_where_they_are_written() {
    let bad = RECIPE.replace("seq-len: 8k1k", "seq-len: 8k/1k").replace("random-range-ratio: 0.5", "random-range-ratio: 1.5");
    let err = Recipe::from_str(Path::new("recipes/k.yaml"), &bad).unwrap_err().to_string();
    assert!(err.contains("recipes/k.yaml:20: arms[2].seq-len: `seq-len` `8k/1k` is not a sequence length"), "{err}");
    assert!(err.contains("fix: write it as InferenceX names it: `1k1k`, `8k1k`, or `<isl>_<osl>` such as `1024_8192`"), "{err}");
    assert!(err.contains("recipes/k.yaml:2: random-range-ratio: `random-range-ratio` must be in (0, 1], found 1.5"), "{err}");
    // A concurrency twice in one arm is refused unless the points select different lengths.
    let twice = RECIPE.replace("      - conc: 8\n", "      - conc: 8\n      - conc: 8\n");
    let err = Recipe::from_str(Path::new("recipes/k.yaml"), &twice).unwrap_err().to_string();
    assert!(err.contains("arm `TP8 1k1k` lists concurrency 8 for seq-len 1k1k twice"), "{err}");
    let split = RECIPE
        .replace("      - conc: 4\n  - name: TP8 1k1k", "      - conc: 4\n      - conc: 4\n        seq-len: 8k1k\n  - name: TP8 1k1k");
    assert!(Recipe::from_str(Path::new("recipes/k.yaml"), &split).is_ok());
    // Without `random-range-ratio` the plan uses InferenceX's default.
    assert_eq!(recipe(&RECIPE.replace("random-range-ratio: 0.5\n", "")).random_range_ratio, None);
}

#[test]
fn a_point_every_row_of_which_is_overridden_is_refused() {
    let master =
        MASTER.replace("    agentic-coding:\n    - search-space:\n      - { tp: 8, ep: 1, kv-offloading: none, conc-list: [4] }\n", "");
    let m = Master::from_str(Path::new("recipes/master.yaml"), &master).unwrap_or_else(|e| panic!("{e}"));
    let text = RECIPE
        .replace("      - conc: 4\n  - name: TP8 1k1k", "      - conc: 4\n      - conc: 4\n        seq-len: 8k1k\n  - name: TP8 1k1k");
    let err = recipe(&text).match_master(m.get("k").unwrap()).unwrap_err().to_string();
    assert!(
        err.contains("recipes/k.yaml:10: arms[0].points[0]: point serves no row: every row it matches (k.scenarios.fixed-seq-len[0].search-space[0], k.scenarios.fixed-seq-len[1].search-space[0]) has a point that selects its `seq-len`"),
        "{err}"
    );
    // With the agentic row it is the agentic row's point.
    assert!(recipe(&text).match_master(&entry()).is_ok());
}

#[test]
fn a_point_serving_two_rows_of_one_length_is_refused() {
    let master = MASTER.replace(
        "      - { tp: 8, conc-list: [4] }\n",
        "      - { tp: 8, conc-list: [4] }\n      - { tp: 8, conc-list: [4], spec-decoding: mtp }\n",
    );
    let m = Master::from_str(Path::new("recipes/master.yaml"), &master).unwrap_or_else(|e| panic!("{e}"));
    let err = recipe(RECIPE).match_master(m.get("k").unwrap()).unwrap_err().to_string();
    assert!(
        err.contains("arms[0].points[0]: point matches 2 master rows (k.scenarios.fixed-seq-len[1].search-space[0], k.scenarios.fixed-seq-len[1].search-space[1])"),
        "{err}"
    );
}
