//! The data layer end to end: fetching over HTTP from a local server (good file, wrong hash,
//! 404, truncated transfer), the mirror, `data verify`, and `load.dataset` in a pipeline when
//! files are missing or malformed. Every test uses its own registry, cache and mirror.

use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};

use assert_cmd::Command;
use sha2::{Digest, Sha256};
use tempfile::TempDir;

use crate::common::stable;

const GOOD: &[u8] = b"a,b\n1,x\n2,?\n3,y\n";

fn sha(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A one-thread HTTP/1.1 server on 127.0.0.1 answering four paths; returns its base URL.
fn serve() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut s) = stream else { continue };
            let mut reader = BufReader::new(s.try_clone().unwrap());
            let mut request = String::new();
            if reader.read_line(&mut request).is_err() {
                continue;
            }
            loop {
                let mut h = String::new();
                if reader.read_line(&mut h).is_err() || h.trim().is_empty() {
                    break;
                }
            }
            let path = request.split_whitespace().nth(1).unwrap_or("/").to_string();
            let (status, body, claimed): (&str, Vec<u8>, usize) = match path.as_str() {
                "/good.csv" => ("200 OK", GOOD.to_vec(), GOOD.len()),
                "/bad.csv" => {
                    let mut b = GOOD.to_vec();
                    b[0] = b'z';
                    ("200 OK", b, GOOD.len())
                }
                // Promises the whole file, sends half of it, then closes.
                "/trunc.csv" => ("200 OK", GOOD[..GOOD.len() / 2].to_vec(), GOOD.len()),
                _ => ("404 Not Found", b"not here".to_vec(), 8),
            };
            let _ = write!(
                s,
                "HTTP/1.1 {status}\r\nContent-Length: {claimed}\r\nConnection: close\r\n\r\n"
            );
            let _ = s.write_all(&body);
            let _ = s.flush();
        }
    });
    format!("http://{addr}")
}

struct Env {
    dir: TempDir,
}

impl Env {
    /// A registry whose dataset `t` has one file `t.csv` at `url` with GOOD's checksum.
    fn new(url: &str) -> Env {
        let dir = TempDir::new().unwrap();
        let reg = format!(
            "[t]\ntitle = 'test'\nhomepage = 'h'\nlicence = 'CC0'\n\
[[t.files]]\nname = 't.csv'\nurl = '{url}'\nsha256 = '{}'\nsize = {}\n\
[t.tables.main]\nfile = 't.csv'\nseparator = ','\nheader = true\nmissing = ['?']\n",
            sha(GOOD),
            GOOD.len()
        );
        fs::write(dir.path().join("registry.toml"), reg).unwrap();
        fs::create_dir_all(dir.path().join("mirror/t")).unwrap();
        Env { dir }
    }

    fn cache_file(&self) -> PathBuf {
        self.dir.path().join("cache/t/t.csv")
    }

    /// `dplab` in this environment, with a fresh, empty instance store per command: a dataset
    /// read is stored under its registered checksum, so a stored one would hide what these
    /// tests check about the file on disk.
    fn cmd(&self) -> Command {
        use std::sync::atomic::{AtomicU64, Ordering};
        static N: AtomicU64 = AtomicU64::new(0);
        let store = self
            .dir
            .path()
            .join(format!("store-{}", N.fetch_add(1, Ordering::Relaxed)));
        let mut c = Command::cargo_bin("dplab").unwrap();
        c.env("DPLAB_STORE", store)
            .env("DPLAB_REGISTRY", self.dir.path().join("registry.toml"))
            .env("DPLAB_DATA_DIR", self.dir.path().join("cache"))
            .env("DPLAB_DATA_MIRROR", "")
            .env("NO_COLOR", "1");
        c
    }

    /// `dplab run -q P --out OUT EXTRA…`, with or without the test mirror.
    fn run(&self, p: &Path, out: &Path, extra: &[&str], mirror: bool) -> std::process::Output {
        let mut c = self.cmd();
        if mirror {
            c.env("DPLAB_DATA_MIRROR", self.dir.path().join("mirror"));
        }
        c.args(["run", "-q"])
            .args(extra)
            .arg(p)
            .arg("--out")
            .arg(out)
            .output()
            .unwrap()
    }

    fn leftovers(&self) -> Vec<String> {
        let d = self.dir.path().join("cache/t");
        fs::read_dir(&d)
            .map(|it| {
                it.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default()
    }
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn fetch_over_http_verifies_and_is_atomic() {
    let base = serve();
    // Good file: downloaded, verified, in place.
    let env = Env::new(&format!("{base}/good.csv"));
    let out = env.cmd().args(["data", "fetch", "t"]).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(fs::read(env.cache_file()).unwrap(), GOOD);
    // A second fetch finds it.
    let out = env.cmd().args(["data", "fetch", "t"]).output().unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("already"));

    // Wrong bytes: error with expected vs got, nothing left behind.
    let env = Env::new(&format!("{base}/bad.csv"));
    let out = env.cmd().args(["data", "fetch", "t"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let e = stderr(&out);
    assert!(e.contains("expected") && e.contains(&sha(GOOD)), "{e}");
    assert!(env.leftovers().is_empty(), "{:?}", env.leftovers());

    // 404.
    let env = Env::new(&format!("{base}/nothing.csv"));
    let out = env.cmd().args(["data", "fetch", "t"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("404"), "{}", stderr(&out));
    assert!(env.leftovers().is_empty());

    // Truncated transfer.
    let env = Env::new(&format!("{base}/trunc.csv"));
    let out = env.cmd().args(["data", "fetch", "t"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(env.leftovers().is_empty(), "{:?}", env.leftovers());
    assert!(!env.cache_file().exists());
}

#[test]
fn mirror_copy_verify_and_corruption() {
    // No server: the URL is unreachable, the mirror must serve.
    let env = Env::new("http://127.0.0.1:9/t.csv");
    let mirror = env.dir.path().join("mirror");
    fs::write(mirror.join("t/t.csv"), GOOD).unwrap();
    let out = env
        .cmd()
        .args(["data", "list", "--mirror"])
        .arg(&mirror)
        .output()
        .unwrap();
    let list = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        list.contains("[yes] t.csv") && list.contains("mirror"),
        "{list}"
    );
    let out = env
        .cmd()
        .args(["data", "fetch", "--all", "--mirror"])
        .arg(&mirror)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(fs::read(env.cache_file()).unwrap(), GOOD);
    let out = env.cmd().args(["data", "verify"]).output().unwrap();
    assert!(out.status.success());
    // A corrupted cache copy is reported and never used.
    fs::write(env.cache_file(), b"a,b\n9,x\n2,?\n3,y\n").unwrap();
    let out = env.cmd().args(["data", "verify"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stdout).contains("BAD"));
    // Unknown dataset names are bad input.
    let out = env.cmd().args(["data", "fetch", "tt"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("did you mean `t`"),
        "{}",
        stderr(&out)
    );
}

fn pipeline(dir: &Path, with: &str) -> PathBuf {
    let p = dir.join("p.yaml");
    fs::write(
        &p,
        format!(
            "name: p\ntitle: t\nsource: {{paper: test, item: none}}\ndescription: d\nseed: 1\nstages:\n  \
raw:\n    kind: load.dataset\n    with: {with}\n  \
dist:\n    kind: load.distribution\n    input: raw\n    with: {{column: b}}\n"
        ),
    )
    .unwrap();
    p
}

#[test]
fn load_dataset_in_a_pipeline() {
    let env = Env::new("http://127.0.0.1:9/t.csv");
    let out_dir = env.dir.path().join("out");
    // Missing everywhere: one clear line, exit 1 — or skipped with --skip-unavailable.
    let p = pipeline(env.dir.path(), "{dataset: t}");
    let out = env
        .cmd()
        .args(["run", "-q"])
        .arg(&p)
        .arg("--out")
        .arg(&out_dir)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    insta::assert_snapshot!(
        "a_dataset_not_in_the_cache",
        stable(&stderr(&out), env.dir.path())
    );
    let out = env.run(&p, &out_dir, &["--skip-unavailable"], false);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).contains("skipped"));
    assert!(!out_dir.join("p").exists());

    // Present in the mirror: '?' is a null and left out of the distribution.
    fs::write(env.dir.path().join("mirror/t/t.csv"), GOOD).unwrap();
    let out = env.run(&p, &out_dir, &[], true);
    assert!(out.status.success(), "{}", stderr(&out));
    let dist = fs::read_to_string(out_dir.join("p/dist.csv")).unwrap();
    assert!(
        dist.contains("x,1,0.5") && dist.contains("y,1,0.5"),
        "{dist}"
    );
    // The manifest describes the dataset it read as data a reader (and jq) can use: its
    // files with their sha256, its tables as the registry reads them — not Rust debug text.
    let m: serde_json::Value =
        serde_json::from_slice(&fs::read(out_dir.join("p/manifest.json")).unwrap()).unwrap();
    let source = &m["stages"][0]["sources"][0];
    assert_eq!(source["dataset"], "t", "{m}");
    assert_eq!(source["files"][0]["file"], "t.csv", "{source}");
    assert!(source["files"][0]["sha256"].is_string(), "{source}");
    assert!(source["tables"].is_object(), "{source}");
    assert!(!m.to_string().contains("TableSpec"), "{m}");

    // A wrong file in the mirror is an integrity error, not data.
    fs::write(
        env.dir.path().join("mirror/t/t.csv"),
        b"a,b\n1,x\n2,?\n3,z\n",
    )
    .unwrap();
    let out = env.run(&p, &out_dir, &[], true);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("sha256"), "{}", stderr(&out));

    // Unknown dataset or table: bad input located in the YAML, with a suggestion.
    let p = pipeline(env.dir.path(), "{dataset: tt}");
    let out = env.cmd().arg("validate").arg(&p).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let mut said = vec![stderr(&out)];
    for with in [
        "{dataset: t, table: mian}",
        "{dataset: t, where: [\"b ~ 3\"]}",
        "{dataset: t, where: [\"b is not missing\"]}",
    ] {
        let p = pipeline(env.dir.path(), with);
        let out = env.cmd().arg("validate").arg(&p).output().unwrap();
        assert_eq!(out.status.code(), Some(2));
        said.push(stderr(&out));
    }
    insta::assert_snapshot!(
        "an_unknown_dataset_table_or_condition",
        stable(&said.join("\n"), env.dir.path())
    );
}

/// The built-in registry against the real files, when this machine has the mirror: the two
/// distributions the rate–distortion paper prints, and the census file's shape.
#[test]
fn real_datasets_from_the_mirror() {
    let Some(mirror) = std::env::var_os("DPLAB_DATA_MIRROR").filter(|m| !m.is_empty()) else {
        eprintln!("skipped: DPLAB_DATA_MIRROR is not set");
        return;
    };
    let dir = TempDir::new().unwrap();
    let p = dir.path().join("real.yaml");
    fs::write(
        &p,
        "name: real\ntitle: t\nsource: {paper: test, item: none}\ndescription: d\nseed: 1\nstages:\n  \
r:\n    kind: load.dataset\n    with: {dataset: movielens-100k, table: ratings, where: [\"item_id = 785\"]}\n    store: false\n  \
p785:\n    kind: load.distribution\n    input: r\n    with: {column: rating}\n  \
a:\n    kind: load.dataset\n    with: {dataset: adult, table: train, where: [\"occupation IS NOT NULL\"]}\n    store: false\n  \
marital:\n    kind: load.distribution\n    input: a\n    with: {column: marital-status}\n  \
c:\n    kind: load.dataset\n    with: {dataset: census-kdd, table: test}\n    store: false\n  \
shape:\n    kind: frame.shape\n    input: [c]\n",
    )
    .unwrap();
    let out = Command::cargo_bin("dplab")
        .unwrap()
        .env("DPLAB_DATA_MIRROR", &mirror)
        .env("DPLAB_DATA_DIR", dir.path().join("cache"))
        .args(["run", "-q"])
        .arg(&p)
        .arg("--out")
        .arg(dir.path().join("out"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let read = |f: &str| fs::read_to_string(dir.path().join("out/real").join(f)).unwrap();
    let p785 = read("p785.csv");
    for (rating, count) in [(1, 2), (2, 6), (3, 19), (4, 8), (5, 4)] {
        assert!(p785.contains(&format!("\n{rating},{count},")), "{p785}");
    }
    let marital = read("marital.csv");
    for (label, count) in [
        ("Divorced", 4258),
        ("Married-AF-spouse", 21),
        ("Married-civ-spouse", 14339),
        ("Married-spouse-absent", 389),
        ("Never-married", 9912),
        ("Separated", 959),
        ("Widowed", 840),
    ] {
        assert!(marital.contains(&format!("{label},{count},")), "{marital}");
    }
    let shape = read("shape.csv");
    assert!(shape.contains("c,99762.0,42.0,ok"), "{shape}");
}

/// A pipeline file `name.yaml` in `dir` loading `with`, then a distribution of column `b`.
fn named_pipeline(dir: &Path, name: &str, with: &str) -> PathBuf {
    let p = dir.join(format!("{name}.yaml"));
    let scratch = pipeline(dir, with);
    let text =
        fs::read_to_string(&scratch)
            .unwrap()
            .replacen("name: p\n", &format!("name: {name}\n"), 1);
    fs::remove_file(scratch).unwrap();
    fs::write(&p, text).unwrap();
    p
}

/// `make run-all` on a fresh machine: `data fetch --pipelines` gets exactly the files the
/// pipelines read (downloaded over HTTP and verified, or used from the mirror where they are),
/// says what it could not get and which pipelines that leaves without data; the run skips
/// those and the report shows them as "data not available" with the command that gets it.
#[test]
fn fetch_for_pipelines_then_run_and_report() {
    let base = serve();
    let env = Env::new(&format!("{base}/good.csv"));
    // Dataset `v`: its file is not on the server (404). Dataset `w`: no checksum registered.
    let mut reg = fs::read_to_string(env.dir.path().join("registry.toml")).unwrap();
    reg.push_str(&format!(
        "[v]\ntitle = 'v'\nhomepage = 'h'\nlicence = 'CC0'\n\
[[v.files]]\nname = 'v.csv'\nurl = '{base}/nothing.csv'\nsha256 = '{}'\nsize = {}\n\
[v.tables.main]\nfile = 'v.csv'\nseparator = ','\nheader = true\n\
[w]\ntitle = 'w'\nhomepage = 'h'\nlicence = 'CC0'\n\
[[w.files]]\nname = 'w.csv'\nurl = '{base}/good.csv'\n\
[w.tables.main]\nfile = 'w.csv'\nseparator = ','\nheader = true\n",
        sha(GOOD),
        GOOD.len()
    ));
    fs::write(env.dir.path().join("registry.toml"), reg).unwrap();
    let pipes = env.dir.path().join("pipelines");
    fs::create_dir_all(&pipes).unwrap();
    named_pipeline(&pipes, "has", "{dataset: t}");
    named_pipeline(&pipes, "lacks", "{dataset: v}");
    named_pipeline(&pipes, "unsure", "{dataset: w}");
    named_pipeline(&pipes, "optional", "{dataset: v, if_missing: empty}");

    let out = env
        .cmd()
        .args(["data", "fetch", "--pipelines"])
        .arg(&pipes)
        .output()
        .unwrap();
    let (o, e) = (String::from_utf8_lossy(&out.stdout), stderr(&out));
    assert_eq!(out.status.code(), Some(1), "{o}{e}");
    assert_eq!(fs::read(env.cache_file()).unwrap(), GOOD);
    // The whole report, which is the point: t fetched; v missing (404) and asked for by two
    // pipelines but fetched once; w never downloaded without a checksum, though the server
    // has it; which pipeline each leaves without data, and the count.
    let whole =
        stable(&format!("stdout:\n{o}stderr:\n{e}"), env.dir.path()).replace(&base, "[SERVER]");
    insta::assert_snapshot!(whole);
    assert!(!env.dir.path().join("cache/w/w.csv").exists());
    assert!(env.leftovers().iter().all(|f| f == "t.csv"));

    // Again: the cached copy is used, nothing downloaded.
    let out = env
        .cmd()
        .args(["data", "fetch", "--pipelines"])
        .arg(pipes.join("has.yaml"))
        .output()
        .unwrap();
    let o = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(o.contains("ok        t/t.csv (in the cache"), "{o}");

    // The rest of run-all: the pipelines without data are skipped, the report says so.
    let results = env.dir.path().join("results");
    let out = env
        .cmd()
        .args(["run", "-q", "--skip-unavailable"])
        .arg(pipes.join("has.yaml"))
        .arg(pipes.join("lacks.yaml"))
        .arg("--out")
        .arg(&results)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let out = env
        .cmd()
        .args(["report"])
        .arg(&results)
        .arg("--pipelines")
        .arg(pipes.join("has.yaml"))
        .arg("--pipelines")
        .arg(pipes.join("lacks.yaml"))
        .output()
        .unwrap();
    let o = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{o}{}", stderr(&out));
    assert!(
        o.contains("2 experiments (1 with results, 1 without data, 0 not run"),
        "{o}"
    );
    let html = fs::read_to_string(results.join("index.html"))
        .unwrap()
        .replace("&#x2f;", "/")
        .replace("&amp;", "&");
    assert!(html.contains("data not available"), "{html}");
    assert!(
        html.contains(&format!(
            "dplab data fetch --pipelines {} && dplab run {}",
            pipes.join("lacks.yaml").display(),
            pipes.join("lacks.yaml").display()
        )),
        "{html}"
    );
}

#[test]
fn fetch_for_pipelines_from_the_mirror_and_bad_input() {
    // The URL is unreachable: the mirror serves, used where it is (not copied).
    let env = Env::new("http://127.0.0.1:9/t.csv");
    let mirror = env.dir.path().join("mirror");
    fs::write(mirror.join("t/t.csv"), GOOD).unwrap();
    let p = pipeline(env.dir.path(), "{dataset: t}");
    let fetch = || {
        env.cmd()
            .args(["data", "fetch", "--mirror"])
            .arg(&mirror)
            .arg("--pipelines")
            .arg(&p)
            .output()
            .unwrap()
    };
    let out = fetch();
    let o = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{o}{}", stderr(&out));
    assert!(o.contains("ok        t/t.csv (in the mirror"), "{o}");
    assert!(o.contains("every file the 1 pipeline(s) read"), "{o}");
    assert!(!env.cache_file().exists());
    // A wrong copy in the mirror is not used; the download is tried, and fails here.
    fs::write(mirror.join("t/t.csv"), b"a,b\n9,x\n2,?\n3,y\n").unwrap();
    let out = fetch();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("MISSING   t/t.csv"),
        "{}",
        stderr(&out)
    );

    // Bad input: exit 2 with the reason.
    let out = env
        .cmd()
        .args(["data", "fetch", "--pipelines", "no/such/dir"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("no such file or directory"));
    let out = env
        .cmd()
        .args(["data", "fetch", "t", "--pipelines"])
        .arg(&p)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let out = env
        .cmd()
        .args(["data", "fetch", "t", "--profile", "ci"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("--pipelines"), "{}", stderr(&out));
    let bad = pipeline(env.dir.path(), "{dataset: tt}");
    let out = env
        .cmd()
        .args(["data", "fetch", "--pipelines"])
        .arg(&bad)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("did you mean `t`"),
        "{}",
        stderr(&out)
    );
}

/// A registry whose dataset `t` is the gzip file `gz` (in the mirror), read as one column
/// `a`, and a pipeline loading it; returns (environment, pipeline).
fn gzip_dataset(gz: &[u8]) -> (Env, PathBuf) {
    let env = Env::new("http://127.0.0.1:9/t.gz");
    let reg = format!(
        "[t]\ntitle = 'test'\nhomepage = 'h'\nlicence = 'CC0'\n\
[[t.files]]\nname = 't.gz'\nurl = 'http://127.0.0.1:9/t.gz'\nsha256 = '{}'\nsize = {}\n\
[t.tables.main]\nfile = 't.gz'\ncompression = 'gzip'\nseparator = ','\ncolumns = ['a']\n",
        sha(gz),
        gz.len()
    );
    fs::write(env.dir.path().join("registry.toml"), reg).unwrap();
    fs::write(env.dir.path().join("mirror/t/t.gz"), gz).unwrap();
    let p = env.dir.path().join("p.yaml");
    fs::write(
        &p,
        "name: p\ntitle: t\nsource: {paper: test, item: none}\ndescription: d\nseed: 1\nstages:\n  raw: {kind: load.dataset, with: {dataset: t}}\n",
    )
    .unwrap();
    (env, p)
}

/// `n` copies of `chunk`, gzip-compressed as they stream in (never held decompressed).
fn gzip_of(chunk: &[u8], n: usize) -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    for _ in 0..n {
        enc.write_all(chunk).unwrap();
    }
    enc.finish().unwrap()
}

/// `dplab run -q P` in `env` with the mirror, under a 3 GiB address-space limit (a small
/// machine): what a hostile file may make it allocate shows as an abort here.
fn run_in_3_gib(env: &Env, p: &Path, extra: &str) -> std::process::Output {
    let mut c = std::process::Command::new("bash");
    for (k, v) in env.cmd().get_envs() {
        match v {
            Some(v) => c.env(k, v),
            None => c.env_remove(k),
        };
    }
    c.env("DPLAB_DATA_MIRROR", env.dir.path().join("mirror"))
        .arg("-c")
        .arg(format!(
            "ulimit -v 3145728; exec timeout 300 {} run -q {} {extra} --no-store --out {}",
            assert_cmd::cargo::cargo_bin("dplab").display(),
            p.display(),
            env.dir.path().join("out").display()
        ))
        .output()
        .unwrap()
}

/// A registry whose dataset `t` is `csv` (in the mirror), a table with a header row, and a
/// pipeline loading it; returns (environment, pipeline).
fn csv_dataset(csv: &[u8]) -> (Env, PathBuf) {
    let env = Env::new("http://127.0.0.1:9/t.csv");
    let reg = format!(
        "[t]\ntitle = 'test'\nhomepage = 'h'\nlicence = 'CC0'\n\
[[t.files]]\nname = 't.csv'\nurl = 'http://127.0.0.1:9/t.csv'\nsha256 = '{}'\nsize = {}\n\
[t.tables.main]\nfile = 't.csv'\nseparator = ','\nheader = true\n",
        sha(csv),
        csv.len()
    );
    fs::write(env.dir.path().join("registry.toml"), reg).unwrap();
    fs::write(env.dir.path().join("mirror/t/t.csv"), csv).unwrap();
    let p = env.dir.path().join("p.yaml");
    fs::write(
        &p,
        "name: p\ntitle: t\nsource: {paper: test, item: none}\ndescription: d\nseed: 1\nstages:\n  raw: {kind: load.dataset, with: {dataset: t}}\n",
    )
    .unwrap();
    (env, p)
}

/// A header of `n` names and one row of `n` values.
fn wide_csv(n: usize) -> Vec<u8> {
    let names: Vec<String> = (0..n).map(|i| format!("c{i}")).collect();
    format!("{}\n{}\n", names.join(","), vec!["1"; n].join(",")).into_bytes()
}

#[test]
fn a_table_of_too_many_columns_is_refused_before_its_columns_are_made() {
    // One row of 10⁶ columns (a 14 MB file, 10⁶ cells) took two minutes and 5.8 GB. A column
    // costs as much as 1000 cells whatever its rows, so --max-cells 10⁶ allows 1000 of them;
    // the header is counted in the first pass and refused before a column is made.
    let (env, p) = csv_dataset(&wide_csv(1001));
    let out = run_in_3_gib(&env, &p, "--max-cells 1000000");
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let e = stderr(&out);
    assert!(
        e.contains("t.csv: 1001 columns, more than the limit of 1000")
            && e.contains("raise it with --max-cells")
            && e.contains("stage `raw`"),
        "{e}"
    );
    let (env, p) = csv_dataset(&wide_csv(1000));
    let out = run_in_3_gib(&env, &p, "--max-cells 1000000");
    assert!(out.status.success(), "{}", stderr(&out));
    // At the default limit (2·10⁵ columns), a header of 3·10⁵ names: making a column for each
    // before counting them asked for more than 3 GiB.
    let (env, p) = csv_dataset(&wide_csv(300_000));
    let out = run_in_3_gib(&env, &p, "");
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("t.csv: 300000 columns, more than the limit of 200000"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn decompression_bombs_are_refused_before_they_are_allocated() {
    // One line of 1 GiB in a 1 MB gzip file: reading it whole aborted the process (SIGABRT at
    // 800 MB resident under a 3 GiB address-space limit).
    let (env, p) = gzip_dataset(&gzip_of(&[b'a'; 1 << 20], 1024));
    let out = run_in_3_gib(&env, &p, "");
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let e = stderr(&out);
    assert!(
        e.contains("t.gz:1: the line is longer than 16 MiB") && e.contains("stage `raw`"),
        "{e}"
    );
    // 10⁸ rows of `1` in a 190 KB file: within --max-cells, but reading them took 3.2 GB.
    // Refused from the counts of a first pass, naming the flag that raises the limit.
    let (env, p) = gzip_dataset(&gzip_of(&b"1\n".repeat(1 << 19), 190));
    let out = run_in_3_gib(&env, &p, "");
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let e = stderr(&out);
    assert!(
        e.contains("99614720 rows × 1 columns") && e.contains("--max-cells"),
        "{e}"
    );
    // The limit is what refuses it: 2²⁰ such rows are read, and refused under a lower one.
    let (env, p) = gzip_dataset(&gzip_of(&b"1\n".repeat(1 << 19), 2));
    let out = run_in_3_gib(&env, &p, "");
    assert!(out.status.success(), "{}", stderr(&out));
    let out = run_in_3_gib(&env, &p, "--max-cells 1000000");
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("1048576 rows × 1 columns"),
        "{}",
        stderr(&out)
    );
    // Blank lines make no rows, but their bytes count: a stream of them ends.
    let (env, p) = gzip_dataset(&gzip_of(&[b'\n'; 1 << 20], 64));
    let out = run_in_3_gib(&env, &p, "--max-cells 1000000");
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("more than 8000000 bytes of text"),
        "{}",
        stderr(&out)
    );
}
