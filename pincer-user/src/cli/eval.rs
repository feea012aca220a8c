//! `pincer eval`: replay a persona corpus against the seven defenses and report Table 2.

use anyhow::Context;
use clap::Args;
use crate::daemon::audit::AuditLog;
use crate::eval::report;
use crate::eval::run::{self, Backend, OfflineFactory};
use crate::eval::{Corpus, DefenseName};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Arguments of `pincer eval`.
#[derive(Debug, Args)]
pub struct EvalArgs {
    /// The corpus folder (default: the repository's `corpus/`).
    #[arg(long)]
    corpus: Option<PathBuf>,
    /// A defense to evaluate (repeatable; default: all seven): nanoclaw, static-judge,
    /// dynamic-judge, conseca+, conseca-judge+, pincer, pincer-p2.
    #[arg(long = "defense", value_name = "NAME")]
    defenses: Vec<String>,
    /// The decider backend; `fake-openai` is the token bench's built-in counting model (no
    /// network, every vote allowed, a prompt cache like a provider's).
    /// Default: the `[decider] backend` of `--config`, else `offline`.
    #[arg(long, value_enum)]
    decider: Option<EvalDecider>,
    /// The daemon's configuration: its `[decider]` section gives the model's endpoint, name,
    /// API key variable and timeout (the environment overrides each, as without it).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// How many times to replay each persona against each defense (figures are means).
    #[arg(long, default_value_t = 1)]
    runs: usize,
    /// Write the results as JSON to this file.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Write SVG charts and an HTML page into this folder.
    #[arg(long)]
    report: Option<PathBuf>,
    /// Write every decision of Pincer and Pincer-P2 to this file, one JSON line each in the
    /// daemon's audit log format (votes, reasons, mechanisms, and the persona and sample).
    #[arg(long, value_name = "FILE")]
    audit: Option<PathBuf>,
}

/// The deciders `pincer eval` can run on: the daemon's backends and the token bench's fake.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum EvalDecider {
    /// Deterministic, no model.
    Offline,
    /// An OpenAI-compatible endpoint.
    #[value(name = "openai")]
    OpenAi,
    /// The Anthropic Messages API.
    Anthropic,
    /// The built-in counting fake of an OpenAI-compatible model.
    #[value(name = "fake-openai")]
    FakeOpenAi,
}

/// The default corpus: `corpus/` in the current folder or one of its parents, else the one
/// beside the crate this binary was built from.
pub(super) fn default_corpus() -> Option<PathBuf> {
    if let Ok(cwd) = std::env::current_dir() {
        for d in cwd.ancestors() {
            let c = d.join("corpus");
            if c.is_dir() {
                return Some(c);
            }
        }
    }
    let built = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join("corpus");
    built.is_dir().then_some(built)
}

/// Runs `pincer eval`.
pub fn run(args: EvalArgs) -> anyhow::Result<ExitCode> {
    let corpus_dir = match args.corpus {
        Some(c) => c,
        None => default_corpus().context("no corpus/ folder found in the current folder, its parents or the source tree; pass --corpus DIR")?,
    };
    let mut defenses = Vec::new();
    for d in &args.defenses {
        let d: DefenseName = d.parse()?;
        if !defenses.contains(&d) {
            defenses.push(d);
        }
    }
    if defenses.is_empty() {
        defenses = DefenseName::ALL.to_vec();
    }
    let settings = args.config.as_deref().map(|p| crate::daemon::config::Config::load(Some(p))).transpose()?.map(|c| c.decider);
    let decider = args.decider.unwrap_or(match settings.as_ref().map(|s| s.backend) {
        Some(Backend::OpenAi) => EvalDecider::OpenAi,
        Some(Backend::Anthropic) => EvalDecider::Anthropic,
        Some(Backend::Offline) | None => EvalDecider::Offline,
    });
    let backend = match decider {
        EvalDecider::Offline => Backend::Offline,
        EvalDecider::OpenAi | EvalDecider::FakeOpenAi => Backend::OpenAi,
        EvalDecider::Anthropic => Backend::Anthropic,
    };
    let corpus = Corpus::load(&corpus_dir)?;
    // The corpus as the user would name it: relative to the current folder when inside it.
    let label = std::env::current_dir()
        .ok()
        .and_then(|cwd| corpus_dir.strip_prefix(&cwd).ok().map(|p| p.display().to_string()))
        .filter(|p| !p.is_empty())
        .unwrap_or_else(|| corpus_dir.display().to_string());
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().context("cannot start the async runtime")?;
    let audit = args.audit.as_deref().map(AuditLog::create).transpose()?;
    let audit = audit.as_ref();
    let mut model_failures = None;
    let outcome = match backend {
        Backend::Offline => run::run(rt.handle(), &corpus, &label, backend, &defenses, args.runs, &OfflineFactory, &|| {}, threads, audit)?,
        Backend::OpenAi | Backend::Anthropic => {
            let factory = match (decider, &settings) {
                (EvalDecider::FakeOpenAi, _) => {
                    println!("model: the built-in counting fake (4 characters a token, a provider's prefix cache, every vote allowed)");
                    crate::eval::llm::LlmFactory::counting()
                }
                (_, Some(s)) => crate::eval::llm::LlmFactory::from_chat(backend, s.chat(backend)?)?,
                (_, None) => crate::eval::llm::LlmFactory::from_env(backend)?,
            };
            let bar = indicatif::ProgressBar::new(run::total_samples(&corpus, defenses.len(), args.runs));
            bar.set_style(
                indicatif::ProgressStyle::with_template("{elapsed_precise} [{bar:40}] {pos}/{len} samples, eta {eta}")
                    .expect("the progress template is valid")
                    .progress_chars("=> "),
            );
            let tick = || bar.inc(1);
            let o = run::run(rt.handle(), &corpus, &label, backend, &defenses, args.runs, &factory, &tick, threads.max(4), audit)?;
            bar.finish_and_clear();
            model_failures = Some(factory.failures());
            o
        }
    };
    print!("{}", report::text(&outcome));
    if let Some(j) = &args.json {
        report::write_json(&outcome, j)?;
        println!("wrote {}", j.display());
    }
    if let Some(r) = &args.report {
        report::write_report(&outcome, r)?;
        println!("wrote {}", r.join("index.html").display());
    }
    if let Some(a) = audit {
        println!("wrote {}", a.path().display());
    }
    if let Some(f) = model_failures {
        if f.all_failed() {
            eprintln!("pincer eval: the model was unreachable: {f}; every decision above is a fail-closed denial, not a result");
            return Ok(ExitCode::FAILURE);
        }
        if f.failed > 0 {
            eprintln!("pincer eval: warning: {f} (each failure was a denial)");
        } else {
            eprintln!("pincer eval: {} model calls, none failed", f.calls);
        }
    }
    Ok(ExitCode::SUCCESS)
}
