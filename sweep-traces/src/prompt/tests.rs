use std::sync::Arc;

use super::*;
use crate::trace::Request;

fn req(t: f64, input: u64, out: u64, ids: &[u64]) -> Request {
    Request {
        t,
        model: "m".into(),
        input_tokens: input,
        output_tokens: out,
        hash_ids: ids.to_vec(),
        api_time: Some(1.0),
        think_time: None,
        ttft: None,
        input_types: None,
        output_types: None,
        stop: None,
    }
}

fn plan(reqs: &[Request], system: Option<u64>) -> Arc<ConversationPlan> {
    let refs: Vec<&Request> = reqs.iter().collect();
    let mut ids = TraceIds::default();
    Arc::new(ConversationPlan::build(7, 9, 64, system, &refs, &[], &mut ids))
}

fn prompt(p: &Arc<ConversationPlan>, turn: u32, marker: Option<Marker>) -> TurnPrompt {
    TurnPrompt { conversation: p.clone(), turn, marker }
}

fn seq(a: u64, b: u64) -> Vec<u64> {
    (a..b).collect()
}

#[test]
fn word_vocab_round_trips_every_id_class() {
    let v = WordVocab::default();
    let m = Marker::new("run", 0, 3, "trace");
    let mut ids = v.marker_ids(&m.hex());
    ids.extend([0, 1, 63, 64, 65, 4095, 4096, 4159, 4160, 59_999]);
    let text = v.decode(&ids);
    assert!(text.starts_with(&m.text()), "{text:?}");
    assert_eq!(v.encode(&text).unwrap(), ids);
    // Every content id has its own word.
    let mut seen = std::collections::HashSet::new();
    for id in 0..v.content_vocab() {
        let w = v.decode(&[id]);
        assert!(seen.insert(w.clone()), "duplicate word {w}");
        assert_eq!(v.encode(&w).unwrap(), vec![id]);
    }
    assert!(v.encode("not-a-word").is_err());
}

#[test]
fn marker_is_rid_plus_12_lowercase_hex_and_differs_per_play() {
    let a = Marker::new("run", 0, 1, "t");
    let b = Marker::new("run", 1, 1, "t");
    let c = Marker::new("run", 0, 2, "t");
    for m in [a, b, c] {
        let t = m.text();
        assert!(t.starts_with("[rid:") && t.ends_with("]\n\n"));
        let hex = &t[5..17];
        assert!(hex.bytes().all(|x| x.is_ascii_digit() || (b'a'..=b'f').contains(&x)));
        assert_eq!(t.len(), 5 + 12 + 3);
    }
    assert_ne!(a, b);
    assert_ne!(a, c);
    assert_eq!(a, Marker::new("run", 0, 1, "t"));
}

#[test]
fn prompt_has_exactly_in_tokens_plus_marker() {
    let reqs = vec![
        req(0.0, 1000, 70, &seq(0, 15)),  // 15 full blocks + 40 tail
        req(5.0, 1280, 10, &seq(0, 20)),  // exact blocks, no tail
        req(9.0, 1300, 10, &seq(0, 5)),   // ids short of `in`: filler blocks
        req(12.0, 1330, 10, &seq(0, 21)), // partial tail named by the 21st id
        req(15.0, 30, 10, &[]),           // smaller than a block
    ];
    let p = plan(&reqs, Some(200));
    let v = WordVocab::default();
    let m = Marker::new("r", 0, 0, "t");
    for (k, r) in reqs.iter().enumerate() {
        let pr = prompt(&p, k as u32, None);
        assert_eq!(pr.token_ids(&v).len() as u64, r.input_tokens, "turn {k}");
        let pm = prompt(&p, k as u32, Some(m));
        assert_eq!(pm.token_ids(&v).len() as u64, r.input_tokens + MARKER_TOKENS as u64);
        // Messages: content tokens without the marker sum to `in`; the last message is a user one.
        let msgs = pm.message_ids(&v);
        let total: usize = msgs.iter().map(|(_, ids)| ids.len()).sum();
        assert_eq!(total as u64, r.input_tokens + MARKER_TOKENS as u64, "turn {k}");
        assert_eq!(msgs.last().unwrap().0, Role::User, "turn {k}");
        // Text re-encodes to the same ids.
        for ((_, ids), msg) in msgs.iter().zip(pm.messages(&v)) {
            assert_eq!(&v.encode(&msg.content).unwrap(), ids);
        }
    }
}

#[test]
fn shared_hash_ids_give_identical_prefix_tokens_and_pages() {
    let a = seq(0, 30);
    let mut b = seq(0, 20);
    b.extend(100..115);
    let reqs = vec![req(0.0, 30 * 64 + 5, 64, &a), req(5.0, 35 * 64, 64, &b)];
    let p = plan(&reqs, Some(5 * 64));
    let v = WordVocab::default();
    let m = Marker::new("r", 0, 0, "t");
    let t0 = prompt(&p, 0, Some(m)).token_ids(&v);
    let t1 = prompt(&p, 1, Some(m)).token_ids(&v);
    let shared = 20 * 64 + MARKER_TOKENS;
    assert_eq!(t0[..shared], t1[..shared]);
    assert_ne!(t0[shared..shared + 64], t1[shared..shared + 64]);
    // Page hashes agree exactly on the shared full pages and diverge after.
    let h0 = prompt(&p, 0, Some(m)).page_hashes(64);
    let h1 = prompt(&p, 1, Some(m)).page_hashes(64);
    let same = h0.iter().zip(&h1).take_while(|(x, y)| x == y).count();
    assert_eq!(same, shared / 64);
    assert_eq!(h0.len(), (30 * 64 + 5 + MARKER_TOKENS) / 64);
    // Another play's marker shares the system pages only.
    let other = prompt(&p, 1, Some(Marker::new("r", 1, 0, "t"))).page_hashes(64);
    let same = h1.iter().zip(&other).take_while(|(x, y)| x == y).count();
    assert_eq!(same, 5);
}

#[test]
fn page_hashes_agree_with_token_content() {
    // Two prompts share a page hash prefix exactly as long as their token prefixes agree.
    let reqs = vec![
        req(0.0, 20 * 64 + 3, 100, &seq(0, 20)),
        req(1.0, 26 * 64 + 9, 100, &[seq(0, 12), seq(50, 64)].concat()),
        req(2.0, 40 * 64, 100, &[seq(0, 12), seq(50, 64), seq(70, 84)].concat()),
    ];
    let p = plan(&reqs, Some(3 * 64));
    let v = WordVocab::default();
    let m = Marker::new("x", 0, 0, "t");
    let all: Vec<(Vec<u32>, Vec<u64>)> = (0..3)
        .map(|k| {
            let pr = prompt(&p, k, Some(m));
            (pr.token_ids(&v), pr.page_hashes(64))
        })
        .collect();
    for i in 0..3 {
        for j in 0..3 {
            let tok_pages = all[i].0.chunks_exact(64).zip(all[j].0.chunks_exact(64)).take_while(|(a, b)| a == b).count();
            let hash_pages = all[i].1.iter().zip(&all[j].1).take_while(|(a, b)| a == b).count();
            assert_eq!(tok_pages, hash_pages, "{i} vs {j}");
        }
    }
}

#[test]
fn segmentation_follows_lcp_and_previous_output() {
    // Turn 0: 4 system blocks + user; turn 1 appends ceil(130/64)=3 assistant blocks then user.
    let reqs = vec![
        req(0.0, 10 * 64, 130, &seq(0, 10)),
        req(5.0, 16 * 64 + 10, 64, &seq(0, 16)),
        // Compaction: keeps 6 blocks only: reset, history cut at 6.
        req(9.0, 9 * 64, 1, &[seq(0, 6), seq(40, 43)].concat()),
    ];
    let p = plan(&reqs, Some(4 * 64));
    let s0 = p.segments(0);
    assert_eq!(s0, vec![Segment { role: Role::System, start: 0, end: 4 }, Segment { role: Role::User, start: 4, end: 10 }]);
    let s1 = p.segments(1);
    assert_eq!(s1[..2], s0[..]);
    assert_eq!(s1[2], Segment { role: Role::Assistant, start: 10, end: 13 });
    assert_eq!(s1[3], Segment { role: Role::User, start: 13, end: 16 });
    assert!(!p.turns[1].reset_context);
    let s2 = p.segments(2);
    assert!(p.turns[2].reset_context);
    assert_eq!(s2[0], Segment { role: Role::System, start: 0, end: 4 });
    assert_eq!(s2[1], Segment { role: Role::User, start: 4, end: 6 });
    assert_eq!(s2[2], Segment { role: Role::Assistant, start: 6, end: 7 });
    assert_eq!(s2.last().unwrap().role, Role::User);
    // Turn k's messages contain turn k-1's messages verbatim when nothing was cut.
    let v = WordVocab::default();
    let m = Marker::new("r", 0, 0, "t");
    let m0 = prompt(&p, 0, Some(m)).messages(&v);
    let m1 = prompt(&p, 1, Some(m)).messages(&v);
    assert_eq!(m1[0], m0[0]);
    // The previous user message lost only its partial tail (no tail in turn 0 here).
    assert_eq!(m1[1], m0[1]);
    assert!(m1[1].content.starts_with(&m.text()));
}

#[test]
fn block_ids_reconstruct_every_turn() {
    let lists =
        [seq(0, 10), seq(0, 14), [seq(0, 13), seq(30, 33)].concat(), [seq(0, 5), seq(60, 70)].concat(), [seq(0, 5), seq(60, 72)].concat()];
    let reqs: Vec<Request> = lists.iter().enumerate().map(|(i, l)| req(i as f64, l.len() as u64 * 64, 10, l)).collect();
    let p = plan(&reqs, None);
    let mut dense = TraceIds::default();
    for (k, l) in lists.iter().enumerate() {
        let want: Vec<u32> = l.iter().map(|&x| dense.dense(x)).collect();
        assert_eq!(p.block_ids(k), want, "turn {k}");
    }
}

#[test]
fn incremental_page_hashes_equal_full_ones() {
    // Growth, a tail, filler, a compaction (reset below the marker) and a one-block edit.
    let reqs = vec![
        req(0.0, 12 * 64 + 7, 100, &seq(0, 12)),
        req(1.0, 15 * 64, 130, &seq(0, 15)),
        req(2.0, 18 * 64 + 30, 20, &seq(0, 10)),
        req(3.0, 9 * 64, 64, &[seq(0, 3), seq(40, 46)].concat()),
        req(4.0, 12 * 64 + 1, 64, &[seq(0, 3), seq(40, 45), seq(60, 64)].concat()),
        req(5.0, 12 * 64 + 1, 64, &[seq(0, 3), seq(40, 45), seq(60, 64)].concat()),
    ];
    let p = plan(&reqs, Some(4 * 64));
    let mut cache = PageHashCache::new(64, 8);
    for marker in [None, Some(Marker::new("r", 0, 0, "t"))] {
        let mut prev: Option<Vec<u64>> = None;
        for k in 0..reqs.len() as u32 {
            let pr = prompt(&p, k, marker);
            let full = pr.page_hashes(64);
            if let (Some(pv), Some(shared)) = (&prev, pr.shared_tokens_with_previous()) {
                // Token-level truth: the shared count is exactly the common token prefix.
                let v = WordVocab::default();
                let (a, b) = (prompt(&p, k - 1, marker).token_ids(&v), pr.token_ids(&v));
                let common = a.iter().zip(&b).take_while(|(x, y)| x == y).count() as u64;
                assert!(shared <= common && common < shared + 64, "turn {k}: shared {shared}, common {common}");
                for s in [shared, shared / 2, 0] {
                    let mut inc = Vec::new();
                    pr.page_hashes_after(64, pv, s, &mut inc);
                    assert_eq!(inc, full, "turn {k}, reuse {s}");
                }
            }
            assert_eq!(&cache.page_hashes(&pr)[..], &full[..]);
            prev = Some(full);
        }
    }
    assert_eq!(cache.len(), 2);
}

#[test]
fn synthetic_conversations_never_send_an_empty_message_before_the_last() {
    let v = WordVocab::default();
    let m = Marker::new("r", 0, 0, "t");
    let mut checked = 0;
    for t in crate::workload::default_pool(42) {
        for s in &t.streams {
            for turn in 0..s.turns.len() as u32 {
                let msgs = prompt(&s.prompts, turn, Some(m)).message_ids(&v);
                let (last, rest) = msgs.split_last().expect("at least one message");
                assert!(rest.iter().all(|(_, ids)| !ids.is_empty()), "{} turn {turn}: empty message", s.conversation_id);
                assert_eq!(last.0, Role::User);
                checked += 1;
            }
        }
    }
    assert!(checked > 1000, "{checked} prompts");
}
