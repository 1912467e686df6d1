//! Narrowing a plan to some of its configs (`sweep run --configs GLOB`): the points of other
//! configs leave, and a canary of a config left out is replaced by the plan's canary rule over
//! what is left.

use super::Plan;

/// `*` and `?` glob match.
pub fn glob_match(pat: &str, s: &str) -> bool {
    crate::changelog::wildcard(pat, s, true)
}

/// Narrows a plan to the configs `glob` matches (`sweep run --configs`).
pub fn filter_configs(plan: &mut Plan, glob: &str) {
    let lost_canary = plan.canary.as_ref().is_some_and(|c| !glob_match(glob, &c.config_key));
    if lost_canary {
        plan.canary = None;
    }
    for m in plan.matrices.iter_mut().chain(plan.evals.iter_mut()) {
        m.points.retain(|p| glob_match(glob, &p.config_key));
    }
    plan.matrices.retain(|m| !m.points.is_empty());
    if lost_canary {
        promote_canary(plan);
    }
    plan.matrices.retain(|m| !m.points.is_empty());
    plan.evals.retain(|m| !m.points.is_empty());
}

/// The canary of the configs that are left, chosen as the plan chooses it: the lowest
/// concurrency of the first of the 1k/1k, 8k/1k and agentic single-node matrices. A narrowed
/// sweep keeps its canary when the plan's own belonged to a config left out.
fn promote_canary(plan: &mut Plan) {
    for name in ["single_node.1k1k", "single_node.8k1k", "single_node.agentic"] {
        if let Some(m) = plan.matrices.iter_mut().find(|m| m.name == name)
            && let Some((i, _)) = m.points.iter().enumerate().min_by_key(|(i, p)| (p.conc, *i))
        {
            let mut c = m.points.remove(i);
            c.matrix = "canary".into();
            plan.canary = Some(c);
            return;
        }
    }
}
