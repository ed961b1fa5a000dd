use std::path::{Path, PathBuf};

use polars::prelude::{DataFrame, DataType};

use super::{rng_from_seed, Ctx, FileSource, KindInfo, Output, ParamError, StageRun};

/// `with:` parsed as a pipeline file writes it.
pub fn yaml(with: &str) -> serde_yaml_ng::Value {
    serde_yaml_ng::from_str(with).unwrap_or_else(|e| panic!("not YAML: {with}: {e}"))
}

/// One instance of `kind` on `inputs` (the stages `in0`, `in1`, …) with parameters `with`
/// and seed `seed`.
pub fn run(
    kind: &KindInfo,
    with: &str,
    inputs: &[&DataFrame],
    seed: u128,
) -> anyhow::Result<Output> {
    Instance::new(kind, with).inputs(inputs).seed(seed).run()
}

/// Why one instance fails when it runs, with the causes the message carries (`{:#}`).
/// Panics when it succeeds.
pub fn fails(kind: &KindInfo, with: &str, inputs: &[&DataFrame], seed: u128) -> String {
    match run(kind, with, inputs, seed) {
        Ok(_) => panic!("{}: {with} ran", kind.name),
        Err(e) => format!("{e:#}"),
    }
}

/// Why `kind` refuses `with` before anything runs, as `path: message` (the path inside
/// `with:`, empty for the mapping). Panics when it accepts them.
pub fn refused(kind: &KindInfo, with: &str) -> String {
    match (kind.build)(&yaml(with)) {
        Ok(_) => panic!("{}: {with} was accepted", kind.name),
        Err(e) => located(&e),
    }
}

fn located(e: &ParamError) -> String {
    format!("{}: {}", e.path.join("."), e.message)
}

/// The numbers of column `name` (missing cells as NaN).
pub fn floats(frame: &DataFrame, name: &str) -> Vec<f64> {
    let c = frame
        .column(name)
        .unwrap_or_else(|_| panic!("no column `{name}` in {frame}"));
    c.cast(&DataType::Float64)
        .unwrap()
        .f64()
        .unwrap()
        .iter()
        .map(|v| v.unwrap_or(f64::NAN))
        .collect()
}

/// Column `name` as text (missing cells as "").
pub fn strings(frame: &DataFrame, name: &str) -> Vec<String> {
    let c = frame
        .column(name)
        .unwrap_or_else(|_| panic!("no column `{name}` in {frame}"));
    c.cast(&DataType::String)
        .unwrap()
        .str()
        .unwrap()
        .iter()
        .map(|v| v.unwrap_or("").to_string())
        .collect()
}

/// The names of a frame's columns, in order.
pub fn names(frame: &DataFrame) -> Vec<String> {
    frame
        .get_column_names()
        .iter()
        .map(|c| c.to_string())
        .collect()
}

/// The files an instance's parameters name, by the path written there.
#[derive(Default)]
struct Files(Vec<(PathBuf, Vec<u8>)>);

impl FileSource for Files {
    fn file(&self, path: &Path) -> Option<&[u8]> {
        self.0
            .iter()
            .find(|(p, _)| p == path)
            .map(|(_, b)| b.as_slice())
    }
}

/// An instance with more than [`run`] gives: files, axis columns in its inputs.
pub struct Instance<'a> {
    kind: &'a KindInfo,
    with: &'a str,
    inputs: Vec<DataFrame>,
    seed: u128,
    files: Files,
    axes: Vec<String>,
}

impl<'a> Instance<'a> {
    pub fn new(kind: &'a KindInfo, with: &'a str) -> Self {
        Instance {
            kind,
            with,
            inputs: Vec::new(),
            seed: 0,
            files: Files::default(),
            axes: Vec::new(),
        }
    }

    pub fn inputs(mut self, inputs: &[&DataFrame]) -> Self {
        self.inputs = inputs.iter().map(|&f| f.clone()).collect();
        self
    }

    pub fn seed(mut self, seed: u128) -> Self {
        self.seed = seed;
        self
    }

    /// The bytes of a file the parameters name, at the path written there.
    pub fn file(mut self, path: &str, bytes: &[u8]) -> Self {
        self.files.0.push((path.into(), bytes.to_vec()));
        self
    }

    /// Columns of the inputs that are axis columns (the engine's `rep`, `eps`, …), which
    /// a kind must not read as data.
    pub fn axes(mut self, axes: &[&str]) -> Self {
        self.axes = axes.iter().map(|a| a.to_string()).collect();
        self
    }

    pub fn run(self) -> anyhow::Result<Output> {
        let built: Box<dyn StageRun> =
            (self.kind.build)(&yaml(self.with)).map_err(|e| anyhow::anyhow!("{}", located(&e)))?;
        built
            .check_files(&self.files)
            .map_err(|e| anyhow::anyhow!("{}", located(&e)))?;
        // The inputs' data columns, as planning knows them from the stages above.
        let known: Vec<Option<Vec<String>>> = self
            .inputs
            .iter()
            .map(|f| {
                Some(
                    names(f)
                        .into_iter()
                        .filter(|c| !self.axes.contains(c))
                        .collect(),
                )
            })
            .collect();
        let declared = built.columns_out(&known);
        let input_names: Vec<String> = (0..self.inputs.len()).map(|i| format!("in{i}")).collect();
        let mut ctx = Ctx {
            inputs: &self.inputs,
            input_names: &input_names,
            rng: rng_from_seed(self.seed),
            seed: self.seed,
            files: &self.files,
            axis_names: &self.axes,
            stage: "test",
            label: "",
            axes: &[],
            again: false,
        };
        let out = built.run(&mut ctx)?;
        if let Some(cols) = declared {
            assert_eq!(
                names(&out.frame),
                cols,
                "{}: the output's columns are not the declared ones",
                self.kind.name
            );
        }
        Ok(out)
    }
}
