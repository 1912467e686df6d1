//! What a point's launch changes against its recipe's base: the `worker` section of the serving
//! recipe (its command, args, `harness-args` and env) when the dashboard runs in the repository
//! that holds the recipe, else the flags every point of the config in that run shares (a
//! recipe is a base plus per-arm and per-point overrides, so what all points share is its base
//! as far as the run can tell).

use crate::recipe::serving::{Launch, Recipe, flag_items, merge_args};
use serde::Serialize;
use std::collections::BTreeMap;

/// The flags and environment a launch is compared against, and where they came from.
#[derive(Clone, Debug, PartialEq)]
pub struct Base {
    /// In words: `recipe recipes/<key>.yaml` or `flags shared by the run's points`.
    pub source: String,
    pub args: Vec<(String, Option<String>)>,
    pub env: BTreeMap<String, String>,
}

/// One flag or variable that differs. `None`: absent; `Some("")`: a flag set without a value.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct Change {
    pub name: String,
    pub base: Option<String>,
    pub point: Option<String>,
}

/// A launch against its base.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct FlagDiff {
    pub base: String,
    pub worker: Vec<Change>,
    pub env: Vec<Change>,
    /// The router's command line, when the point runs one (recipes put routers on arms).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub router: Option<String>,
}

/// The recipe's `worker` section as `Recipe::resolve` starts from it.
pub fn recipe_base(recipe: &Recipe, shown_path: &str) -> Base {
    let mut args = recipe.worker.command.clone();
    let mut flags = Vec::new();
    merge_args(&mut flags, &recipe.worker.args);
    merge_args(&mut flags, &recipe.harness_args);
    args.extend(flags);
    Base { source: format!("recipe {shown_path}"), args: flag_items(&args), env: recipe.worker.env.clone() }
}

/// The flag items (with their values) and variables that every one of `launches` has.
pub fn shared_base(launches: &[&Launch]) -> Base {
    let source = "flags shared by the run's points of this config".to_string();
    let Some((first, rest)) = launches.split_first() else {
        return Base { source, args: Vec::new(), env: BTreeMap::new() };
    };
    let others: Vec<Vec<(String, Option<String>)>> = rest.iter().map(|l| flag_items(&l.worker_argv)).collect();
    let args = flag_items(&first.worker_argv).into_iter().filter(|item| others.iter().all(|o| o.contains(item))).collect();
    let env =
        first.env.iter().filter(|(k, v)| rest.iter().all(|l| l.env.get(*k) == Some(*v))).map(|(k, v)| (k.clone(), v.clone())).collect();
    Base { source, args, env }
}

/// What `launch` sets differently from `base`: flags in the launch's order, then those it drops.
pub fn diff(base: &Base, launch: &Launch) -> FlagDiff {
    let point = flag_items(&launch.worker_argv);
    let find =
        |items: &[(String, Option<String>)], name: &str| items.iter().find(|(n, _)| n == name).map(|(_, v)| v.clone().unwrap_or_default());
    let mut worker = Vec::new();
    for (name, value) in &point {
        let b = find(&base.args, name);
        let p = Some(value.clone().unwrap_or_default());
        if b != p {
            worker.push(Change { name: name.clone(), base: b, point: p });
        }
    }
    for (name, value) in &base.args {
        if !point.iter().any(|(n, _)| n == name) {
            worker.push(Change { name: name.clone(), base: Some(value.clone().unwrap_or_default()), point: None });
        }
    }
    let mut env = Vec::new();
    for (k, v) in &launch.env {
        if base.env.get(k) != Some(v) {
            env.push(Change { name: k.clone(), base: base.env.get(k).cloned(), point: Some(v.clone()) });
        }
    }
    for (k, v) in &base.env {
        if !launch.env.contains_key(k) {
            env.push(Change { name: k.clone(), base: Some(v.clone()), point: None });
        }
    }
    let router = launch.router_argv.as_ref().map(|r| crate::recipe::serving::shell_quote(r));
    FlagDiff { base: base.source.clone(), worker, env, router }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn launch(argv: &str, env: &[(&str, &str)]) -> Launch {
        Launch {
            arm: "a".into(),
            conc: 1,
            worker_argv: argv.split_whitespace().map(str::to_string).collect(),
            env: env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            router_argv: None,
            router_env: BTreeMap::new(),
            golden_al: None,
            client_args: Vec::new(),
        }
    }

    #[test]
    fn a_recipe_base_shows_changed_added_and_dropped_flags_and_env() {
        let text = "config-key: k\nworker:\n  command: python3 -m sglang.launch_server\n  args: [--tp-size, \"8\", --trust-remote-code, --mem, \"0.8\"]\n  env: {A: \"1\", B: \"2\"}\n  harness-args: [--enable-metrics]\narms:\n  - name: TP8\n    gpus: 8\n    points:\n      - conc: 1\n";
        let recipe = Recipe::from_str(std::path::Path::new("recipes/k.yaml"), text).expect("recipe parses");
        let base = recipe_base(&recipe, "recipes/k.yaml");
        assert_eq!(base.source, "recipe recipes/k.yaml");
        let l = launch(
            "python3 -m sglang.launch_server --tp-size 4 --trust-remote-code --max-running-requests 64 --dp-attn --enable-metrics",
            &[("A", "1"), ("B", "3"), ("C", "x")],
        );
        let d = diff(&base, &l);
        let c = |n: &str, b: Option<&str>, p: Option<&str>| Change { name: n.into(), base: b.map(Into::into), point: p.map(Into::into) };
        assert_eq!(
            d.worker,
            vec![
                c("--tp-size", Some("8"), Some("4")),
                c("--max-running-requests", None, Some("64")),
                c("--dp-attn", None, Some("")),
                c("--mem", Some("0.8"), None),
            ]
        );
        assert_eq!(d.env, vec![c("B", Some("2"), Some("3")), c("C", None, Some("x"))]);
        // The resolved launch of the recipe's own point differs from the base in nothing.
        let own = recipe.resolve(0, 0, "k", None).expect("resolves");
        let d = diff(&base, &own);
        assert!(d.worker.is_empty() && d.env.is_empty(), "{d:?}");
    }

    #[test]
    fn without_a_recipe_the_base_is_what_every_point_shares() {
        let a = launch("serve --tp 4 --conc-cap 8 --x", &[("A", "1"), ("B", "1")]);
        let b = launch("serve --tp 4 --conc-cap 16 --x", &[("A", "1"), ("B", "2")]);
        let base = shared_base(&[&a, &b]);
        let d = diff(&base, &b);
        assert_eq!(d.worker, vec![Change { name: "--conc-cap".into(), base: None, point: Some("16".into()) }]);
        assert_eq!(d.env, vec![Change { name: "B".into(), base: None, point: Some("2".into()) }]);
        assert!(d.base.contains("shared"));
    }
}
