//! Reports of an evaluation: the printed tables, the JSON of `corpus/FORMAT.md`, SVG charts
//! and a self-contained HTML page.

use crate::eval::corpus::AttackType;
use crate::eval::defense::DefenseName;
use crate::decider::Section;
use crate::eval::metrics::{ratio, Counts, Figures};
use crate::eval::run::Evaluation;
use serde_json::{json, Map, Value};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// Errors of writing reports.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// A report file or folder could not be written.
    #[error("cannot write {path}: {source}")]
    Write {
        /// The file or folder.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

fn pct(x: f64) -> String {
    format!("{:.1}", 100.0 * x)
}

/// A rate in % with its 95% interval: `6.6 [2.6-15.9]`.
fn pct_ci(x: f64, (lo, hi): (f64, f64)) -> String {
    format!("{} [{}-{}]", pct(x), pct(lo), pct(hi))
}

fn num(x: f64) -> Value {
    if x.fract() == 0.0 && x.abs() < 9.0e15 {
        json!(x as i64)
    } else {
        json!((x * 10000.0).round() / 10000.0)
    }
}

fn rate(x: f64) -> Value {
    json!((x * 10000.0).round() / 10000.0)
}

/// The personas of an outcome, in order.
fn personas(o: &Evaluation) -> Vec<String> {
    let mut v: Vec<String> = Vec::new();
    for r in &o.rows {
        if !v.contains(&r.persona) {
            v.push(r.persona.clone());
        }
    }
    v
}

/// The defenses of an outcome, in order.
fn defenses(o: &Evaluation) -> Vec<DefenseName> {
    let mut v = Vec::new();
    for r in &o.rows {
        if !v.contains(&r.defense) {
            v.push(r.defense);
        }
    }
    v
}

fn figures(o: &Evaluation, persona: &str, d: DefenseName) -> Option<Figures> {
    o.rows.iter().find(|r| r.persona == persona && r.defense == d).map(|r| Figures::mean(&r.runs))
}

/// The printed report: Table 2 (ASR, cASR, BGR, cBGR in %), per-attack-type figures,
/// escalations, tokens and the elapsed time.
pub fn text(o: &Evaluation) -> String {
    let ps = personas(o);
    let ds = defenses(o);
    let mut s = String::new();
    let _ = writeln!(s, "Table 2: corpus {}, decider {}, {} run(s); rates in % [95% Wilson interval]", o.corpus, o.backend, o.runs);
    let _ = write!(s, "{:<16}", "defense");
    for p in &ps {
        let _ = write!(s, " | {:^75}", p);
    }
    let _ = writeln!(s);
    let _ = write!(s, "{:<16}", "");
    for _ in &ps {
        let _ = write!(s, " | {:>18} {:>18} {:>18} {:>18}", "ASR", "cASR", "BGR", "cBGR");
    }
    let _ = writeln!(s);
    for &d in &ds {
        let _ = write!(s, "{:<16}", d.as_str());
        for p in &ps {
            match figures(o, p, d) {
                Some(f) => {
                    let [a, ca, b, cb] = f.intervals;
                    let _ = write!(s, " | {:>18} {:>18} {:>18} {:>18}", pct_ci(f.asr, a), pct_ci(f.casr, ca), pct_ci(f.bgr, b), pct_ci(f.cbgr, cb));
                }
                None => {
                    let _ = write!(s, " | {:>75}", "-");
                }
            }
        }
        let _ = writeln!(s);
    }
    for p in &ps {
        let _ = writeln!(s);
        let _ = writeln!(s, "{p}: per attack type (granted/requested/n), escalations, tokens");
        let _ = write!(s, "{:<16}", "defense");
        for t in AttackType::ALL {
            let _ = write!(s, " {:>11}", t.as_str());
        }
        let _ = writeln!(s, " {:>6} {:>7} {:>10} {:>8} {:>6}", "util", "escal", "tok in", "tok out", "calls");
        for &d in &ds {
            let Some(f) = figures(o, p, d) else { continue };
            let _ = write!(s, "{:<16}", d.as_str());
            for t in AttackType::ALL {
                let [n, r, g] = f.by_attack[&t];
                let _ = write!(s, " {:>11}", format!("{}/{}/{}", fmt_n(g), fmt_n(r), fmt_n(n)));
            }
            let _ = writeln!(
                s,
                " {:>6} {:>7} {:>10} {:>8} {:>6}",
                format!("{}/{}", fmt_n(f.utility_granted), fmt_n(f.utility_requested)),
                fmt_n(f.escalations),
                fmt_n(f.tokens[0]),
                fmt_n(f.tokens[1]),
                fmt_n(f.tokens[2])
            );
        }
    }
    if o.rows.iter().any(|r| r.runs.iter().any(|c| c.tokens.calls > 0)) {
        let _ = writeln!(s);
        s.push_str(&token_bench(o));
    }
    let _ = writeln!(s);
    let _ = writeln!(s, "elapsed: {:.2} s", o.elapsed.as_secs_f64());
    s
}

/// The token bench: per defense (all personas, then each persona) the model calls and tokens
/// per decision, the share of input tokens a prompt cache served and each prompt section's
/// share of the input tokens.
pub fn token_bench(o: &Evaluation) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "Tokens per decision (decider {}): calls, input and output tokens per decided request; cached = share of input tokens served from the prompt cache; then each prompt section's share of input tokens, in %", o.backend);
    let _ = write!(s, "{:<16} {:<14} {:>9} {:>9} {:>8} {:>8} {:>7}", "defense", "persona", "decisions", "calls/dec", "in/dec", "out/dec", "cached");
    for sec in Section::ALL {
        let _ = write!(s, " {:>8}", short(sec));
    }
    let _ = writeln!(s);
    for d in defenses(o) {
        let rows: Vec<(String, Figures)> = personas(o).into_iter().filter_map(|p| figures(o, &p, d).map(|f| (p, f))).collect();
        let all = sum_figures(rows.iter().map(|(_, f)| f));
        for (p, f) in std::iter::once(("all".to_string(), all)).chain(rows) {
            let per = |x: f64| ratio(x, f.decisions);
            let _ = write!(
                s,
                "{:<16} {:<14} {:>9} {:>9.2} {:>8.0} {:>8.0} {:>7}",
                d.as_str(),
                p,
                fmt_n(f.decisions),
                per(f.tokens[2]),
                per(f.tokens[0]),
                per(f.tokens[1]),
                pct(ratio(f.cached, f.tokens[0]))
            );
            for (i, _) in Section::ALL.iter().enumerate() {
                let _ = write!(s, " {:>8}", pct(ratio(f.sections[i], f.tokens[0])));
            }
            let _ = writeln!(s);
        }
    }
    s
}

fn short(sec: Section) -> &'static str {
    match sec {
        Section::Instructions => "instr",
        Section::Policies => "policies",
        Section::PastTasks => "past",
        Section::Session => "session",
        Section::Tree => "tree",
        Section::Precommitted => "precomm",
        Section::Request => "request",
        Section::Content => "content",
    }
}

/// The token figures of several personas added up (decisions, tokens, cache, sections).
fn sum_figures<'a>(fs: impl Iterator<Item = &'a Figures>) -> Figures {
    let mut all = Counts::default().figures();
    for f in fs {
        all.decisions += f.decisions;
        all.cached += f.cached;
        for i in 0..3 {
            all.tokens[i] += f.tokens[i];
        }
        for i in 0..all.sections.len() {
            all.sections[i] += f.sections[i];
        }
    }
    all
}

fn fmt_n(x: f64) -> String {
    if x.fract() == 0.0 {
        format!("{x:.0}")
    } else {
        format!("{x:.1}")
    }
}

fn counts_json(persona: &str, d: DefenseName, f: &Figures) -> Map<String, Value> {
    let mut by = Map::new();
    for t in AttackType::ALL {
        let [n, r, g] = f.by_attack[&t];
        by.insert(t.as_str().into(), json!({"n": num(n), "requested": num(r), "granted": num(g)}));
    }
    let mut v = json!({
        "persona": persona,
        "defense": d.as_str(),
        "attack_n": num(f.attack_n),
        "attack_requested": num(f.attack_requested),
        "attack_granted": num(f.attack_granted),
        "utility_n": num(f.utility_n),
        "utility_requested": num(f.utility_requested),
        "utility_granted": num(f.utility_granted),
        "asr": rate(f.asr),
        "casr": rate(f.casr),
        "bgr": rate(f.bgr),
        "cbgr": rate(f.cbgr),
        "asr_ci": [rate(f.intervals[0].0), rate(f.intervals[0].1)],
        "casr_ci": [rate(f.intervals[1].0), rate(f.intervals[1].1)],
        "bgr_ci": [rate(f.intervals[2].0), rate(f.intervals[2].1)],
        "cbgr_ci": [rate(f.intervals[3].0), rate(f.intervals[3].1)],
        "escalations": num(f.escalations),
        "by_attack": by,
        "decisions": num(f.decisions),
        "tokens": {"input": num(f.tokens[0]), "output": num(f.tokens[1]), "calls": num(f.tokens[2])},
    });
    // A run with model calls adds the token bench's figures to `tokens`.
    if f.tokens[2] > 0.0 {
        v["tokens"]["cached"] = num(f.cached);
        v["tokens"]["sections"] = Value::Object(Section::ALL.iter().map(|&sec| (sec.as_str().to_string(), num(f.sections[sec as usize]))).collect());
    }
    match v {
        Value::Object(m) => m,
        _ => unreachable!("json! of an object literal is an object"),
    }
}

/// The JSON of `corpus/FORMAT.md`: `format`, `corpus`, `backend`, `runs`, `results`; each
/// result holds the mean figures and, when `runs > 1`, `per_run` with each run's object.
/// Beside the format's fields (which keep their meaning) each result adds `asr_ci`,
/// `casr_ci`, `bgr_ci` and `cbgr_ci`: the rate's 95% Wilson interval as `[low, high]`,
/// and `decisions`, the requests decided; with model calls `tokens` adds `cached` and
/// `sections` (the token bench's figures).
pub fn json(o: &Evaluation) -> Value {
    let mut results = Vec::new();
    for r in &o.rows {
        let mut m = counts_json(&r.persona, r.defense, &Figures::mean(&r.runs));
        if o.runs > 1 {
            let per: Vec<Value> = r.runs.iter().map(|c: &Counts| Value::Object(counts_json(&r.persona, r.defense, &c.figures()))).collect();
            m.insert("per_run".into(), Value::Array(per));
        }
        results.push(Value::Object(m));
    }
    json!({"format": 1, "corpus": o.corpus, "backend": o.backend.as_str(), "runs": o.runs, "results": results})
}

/// Writes the JSON to `path`.
pub fn write_json(o: &Evaluation, path: &Path) -> Result<(), ReportError> {
    let text = serde_json::to_string_pretty(&json(o)).expect("a JSON value always serializes");
    std::fs::write(path, text + "\n").map_err(|source| ReportError::Write { path: path.to_path_buf(), source })
}

const COLORS: [&str; 7] = ["#7f7f7f", "#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#d62728", "#e377c2"];

fn color(d: DefenseName) -> &'static str {
    COLORS[DefenseName::ALL.iter().position(|x| *x == d).unwrap_or(0)]
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// An SVG scatter chart: ASR (x) against BGR (y), one point per defense and persona
/// (colour: defense; marker: persona).
pub fn svg_asr_bgr(o: &Evaluation) -> String {
    let (w, h, m) = (640.0, 480.0, 60.0);
    let (pw, ph) = (w - 2.0 * m - 150.0, h - 2.0 * m);
    let x = |v: f64| m + v * pw;
    let y = |v: f64| h - m - v * ph;
    let mut s = format!(r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="sans-serif" font-size="12">"#);
    let _ = write!(s, r#"<rect width="{w}" height="{h}" fill="white"/><text x="{}" y="24" text-anchor="middle" font-size="15">ASR against BGR (upper left is better)</text>"#, m + pw / 2.0);
    for i in 0..=10 {
        let v = i as f64 / 10.0;
        let _ = write!(s, r##"<line x1="{:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="#e5e5e5"/><line x1="{:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="#e5e5e5"/>"##, x(v), y(0.0), x(v), y(1.0), x(0.0), y(v), x(1.0), y(v));
        if i % 2 == 0 {
            let _ = write!(s, r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}%</text><text x="{:.1}" y="{:.1}" text-anchor="end">{}%</text>"#, x(v), y(0.0) + 16.0, i * 10, x(0.0) - 6.0, y(v) + 4.0, i * 10);
        }
    }
    let _ = write!(s, r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">ASR (attack success rate)</text>"#, m + pw / 2.0, h - 18.0);
    let _ = write!(s, r#"<text x="16" y="{:.1}" text-anchor="middle" transform="rotate(-90 16 {:.1})">BGR (benign grant rate)</text>"#, m + ph / 2.0, m + ph / 2.0);
    let ps = personas(o);
    for r in &o.rows {
        let f = Figures::mean(&r.runs);
        let pi = ps.iter().position(|p| *p == r.persona).unwrap_or(0);
        let (cx, cy, c) = (x(f.asr), y(f.bgr), color(r.defense));
        let title = format!("{} / {}: ASR {}%, BGR {}%", r.persona, r.defense, pct(f.asr), pct(f.bgr));
        match pi % 3 {
            0 => {
                let _ = write!(s, r#"<circle cx="{cx:.1}" cy="{cy:.1}" r="6" fill="{c}" fill-opacity="0.85"><title>{}</title></circle>"#, esc(&title));
            }
            1 => {
                let _ = write!(s, r#"<rect x="{:.1}" y="{:.1}" width="11" height="11" fill="{c}" fill-opacity="0.85"><title>{}</title></rect>"#, cx - 5.5, cy - 5.5, esc(&title));
            }
            _ => {
                let _ = write!(s, r#"<polygon points="{:.1},{:.1} {:.1},{:.1} {:.1},{:.1}" fill="{c}" fill-opacity="0.85"><title>{}</title></polygon>"#, cx, cy - 7.0, cx - 6.5, cy + 5.0, cx + 6.5, cy + 5.0, esc(&title));
            }
        }
    }
    // Legend.
    let lx = w - 150.0 - 10.0 + 20.0;
    let mut ly = m;
    for d in defenses(o) {
        let _ = write!(s, r#"<rect x="{lx}" y="{:.1}" width="10" height="10" fill="{}"/><text x="{}" y="{:.1}">{}</text>"#, ly - 9.0, color(d), lx + 16.0, ly, esc(d.as_str()));
        ly += 18.0;
    }
    ly += 10.0;
    for (i, p) in ps.iter().enumerate() {
        let marker = ["●", "■", "▲"][i % 3];
        let _ = write!(s, r#"<text x="{lx}" y="{ly:.1}">{marker} {}</text>"#, esc(p));
        ly += 18.0;
    }
    s.push_str("</svg>\n");
    s
}

/// An SVG bar chart: ASR per attack type, one group per attack type and persona, one bar per
/// defense.
pub fn svg_asr_by_type(o: &Evaluation) -> String {
    let ps = personas(o);
    let ds = defenses(o);
    let groups: Vec<(String, AttackType)> = ps.iter().flat_map(|p| AttackType::ALL.into_iter().map(move |t| (p.clone(), t))).collect();
    let bar = 9.0;
    let gw = bar * ds.len() as f64 + 14.0;
    let m = 60.0;
    let w = (m * 2.0 + gw * groups.len() as f64 + 150.0).max(500.0);
    let h = 420.0;
    let ph = h - 2.0 * m - 20.0;
    let y = |v: f64| h - m - 20.0 - v * ph;
    let mut s = format!(r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="sans-serif" font-size="11">"#);
    let _ = write!(s, r#"<rect width="{w}" height="{h}" fill="white"/><text x="{:.1}" y="24" text-anchor="middle" font-size="15">ASR per attack type (granted / samples of the type)</text>"#, w / 2.0);
    for i in 0..=5 {
        let v = i as f64 / 5.0;
        let _ = write!(s, r##"<line x1="{m}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="#e5e5e5"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}%</text>"##, y(v), m + gw * groups.len() as f64, y(v), m - 6.0, y(v) + 4.0, i * 20);
    }
    for (gi, (p, t)) in groups.iter().enumerate() {
        let gx = m + gi as f64 * gw + 7.0;
        for (di, &d) in ds.iter().enumerate() {
            let Some(f) = figures(o, p, d) else { continue };
            let [n, _, g] = f.by_attack[t];
            let v = if n > 0.0 { g / n } else { 0.0 };
            let bx = gx + di as f64 * bar;
            let _ = write!(s, r#"<rect x="{bx:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="{}"><title>{}</title></rect>"#, y(v), bar - 1.0, (y(0.0) - y(v)).max(0.0), color(d), esc(&format!("{p} / {} / {}: {}/{} granted", d, t.as_str(), fmt_n(g), fmt_n(n))));
        }
        let _ = write!(s, r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#, gx + bar * ds.len() as f64 / 2.0, y(0.0) + 14.0, t.as_str());
    }
    for (pi, p) in ps.iter().enumerate() {
        let x0 = m + (pi * AttackType::ALL.len()) as f64 * gw;
        let _ = write!(s, r#"<text x="{:.1}" y="{:.1}" text-anchor="middle" font-size="13">{}</text>"#, x0 + gw * AttackType::ALL.len() as f64 / 2.0, y(0.0) + 32.0, esc(p));
    }
    let lx = m + gw * groups.len() as f64 + 20.0;
    for (i, &d) in ds.iter().enumerate() {
        let ly = m + i as f64 * 18.0;
        let _ = write!(s, r#"<rect x="{lx:.1}" y="{:.1}" width="10" height="10" fill="{}"/><text x="{:.1}" y="{ly:.1}">{}</text>"#, ly - 9.0, color(d), lx + 16.0, esc(d.as_str()));
    }
    s.push_str("</svg>\n");
    s
}

/// A self-contained HTML page: the table, the per-type figures and both charts inline.
pub fn html(o: &Evaluation) -> String {
    let mut s = String::from("<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>Pincer evaluation</title>\n<style>body{font-family:sans-serif;margin:2em;max-width:1200px}table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:4px 8px;text-align:right}th{background:#f3f3f3}td:first-child{text-align:left}</style></head><body>\n");
    let _ = writeln!(s, "<h1>Pincer evaluation</h1><p>Corpus <code>{}</code>, decider <b>{}</b>, {} run(s), {:.2} s.</p>", esc(&o.corpus), o.backend, o.runs, o.elapsed.as_secs_f64());
    let ps = personas(o);
    let ds = defenses(o);
    s.push_str("<h2>Table 2 (%, with 95% Wilson intervals)</h2><table><tr><th rowspan=\"2\">defense</th>");
    for p in &ps {
        let _ = write!(s, "<th colspan=\"4\">{}</th>", esc(p));
    }
    s.push_str("</tr><tr>");
    for _ in &ps {
        s.push_str("<th>ASR</th><th>cASR</th><th>BGR</th><th>cBGR</th>");
    }
    s.push_str("</tr>\n");
    for &d in &ds {
        let _ = write!(s, "<tr><td>{}</td>", esc(d.as_str()));
        for p in &ps {
            match figures(o, p, d) {
                Some(f) => {
                    let [a, ca, b, cb] = f.intervals;
                    let _ = write!(s, "<td>{}</td><td>{}</td><td>{}</td><td>{}</td>", pct_ci(f.asr, a), pct_ci(f.casr, ca), pct_ci(f.bgr, b), pct_ci(f.cbgr, cb));
                }
                None => s.push_str("<td colspan=\"4\">-</td>"),
            }
        }
        s.push_str("</tr>\n");
    }
    s.push_str("</table>\n");
    for p in &ps {
        let _ = write!(s, "<h2>{}: per attack type (granted / requested / n)</h2><table><tr><th>defense</th>", esc(p));
        for t in AttackType::ALL {
            let _ = write!(s, "<th>{}</th>", t.as_str());
        }
        s.push_str("<th>utility granted / requested / n</th><th>escalations</th><th>tokens in</th><th>tokens out</th><th>calls</th></tr>\n");
        for &d in &ds {
            let Some(f) = figures(o, p, d) else { continue };
            let _ = write!(s, "<tr><td>{}</td>", esc(d.as_str()));
            for t in AttackType::ALL {
                let [n, r, g] = f.by_attack[&t];
                let _ = write!(s, "<td>{} / {} / {}</td>", fmt_n(g), fmt_n(r), fmt_n(n));
            }
            let _ = writeln!(
                s,
                "<td>{} / {} / {}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                fmt_n(f.utility_granted),
                fmt_n(f.utility_requested),
                fmt_n(f.utility_n),
                fmt_n(f.escalations),
                fmt_n(f.tokens[0]),
                fmt_n(f.tokens[1]),
                fmt_n(f.tokens[2])
            );
        }
        s.push_str("</table>\n");
    }
    s.push_str("<h2>Charts</h2>\n");
    s.push_str(&svg_asr_bgr(o));
    s.push_str(&svg_asr_by_type(o));
    s.push_str("</body></html>\n");
    s
}

/// Writes `asr_bgr.svg`, `asr_by_type.svg` and `index.html` into `dir` (created if needed).
pub fn write_report(o: &Evaluation, dir: &Path) -> Result<(), ReportError> {
    std::fs::create_dir_all(dir).map_err(|source| ReportError::Write { path: dir.to_path_buf(), source })?;
    for (name, body) in [("asr_bgr.svg", svg_asr_bgr(o)), ("asr_by_type.svg", svg_asr_by_type(o)), ("index.html", html(o))] {
        let p = dir.join(name);
        std::fs::write(&p, body).map_err(|source| ReportError::Write { path: p.clone(), source })?;
    }
    Ok(())
}
