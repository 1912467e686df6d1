//! The gsm8k eval on the real shared inputs. `#[ignore]`d: `.ci/run` runs them with
//! `SWEEP_SHARED_DATA` set.

mod common;
use common::*;
use harness::eval::{data, score, task};
use harness::gate::Thresholds;

#[test]
#[ignore = "needs the shared data (SWEEP_SHARED_DATA)"]
fn the_embedded_gsm8k_is_the_shared_copy_row_for_row() {
    let shared = data::load_dir(&shared_data().join("gsm8k")).unwrap_or_else(|e| panic!("{e}"));
    let embedded = data::embedded();
    assert_eq!((shared.test.len(), shared.train.len()), (data::TEST_ROWS, data::TRAIN_ROWS));
    assert!(shared.test == embedded.test, "the embedded test split differs from the shared one");
    assert!(shared.train == embedded.train, "the embedded train split differs from the shared one");
    // The same questions, the same few-shot draws, the same prompts.
    let a: Vec<String> = task::prompts(&shared, 1319).iter().map(|p| task::prompt_hash(&p.messages(&shared))).collect();
    assert_eq!(task::sha256_hex(&a.concat()), "871c6846ed18a260242fe129dff6afbc56092a1ab31044031b504192fd569c9b");
}

#[test]
#[ignore = "needs the shared data (SWEEP_SHARED_DATA)"]
fn every_shared_gold_answer_scores_one_with_both_filters() {
    let d = data::load_dir(&shared_data().join("gsm8k")).unwrap_or_else(|e| panic!("{e}"));
    for (i, doc) in d.test.iter().enumerate() {
        let n = doc.answer.rsplit("#### ").next().unwrap();
        for response in [format!("#### {n}"), format!("So the total is {n}.\n#### {n}"), format!("The answer is {n}.")] {
            let s = score::score(&response, &doc.answer);
            let strict_expected = if response.contains("####") { 1.0 } else { 0.0 };
            assert_eq!((s.strict_match, s.flexible_match), (strict_expected, 1.0), "doc {i}: {response:?} → {s:?}");
        }
    }
}

#[test]
#[ignore = "needs the shared data (SWEEP_SHARED_DATA)"]
fn the_embedded_thresholds_are_inferencexs() {
    let shared = Thresholds::load(&shared_data().join("inferencex/thresholds.yaml")).unwrap();
    assert_eq!(shared, Thresholds::embedded());
    assert_eq!(shared.lookup(Some("dsv4"), "gsm8k"), (0.91, "models.dsv4".into()));
}
