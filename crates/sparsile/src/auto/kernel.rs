//! A program compiled for whatever it is called with: the candidate chosen for each
//! input (see [`super::select`]) compiled once and reused.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use sparsile_formats::SparseTensor;
use sparsile_ir::settings::Settings;
use sparsile_runtime::cuda::{CudaStream, DeviceArray, DeviceInput, DeviceOutput, OutputSpec};
use sparsile_runtime::Outputs;
use sparsile_tune::op::{classify, OpInfo};
use sparsile_tune::space::Candidate;

use super::call_key::CallKey;
use super::select::{select, Context, Selection, Source};
use crate::compile::{CompileError, Kernel, RunOptions, Target};
use crate::notation;
use crate::recipe::compile_recipe_for;

/// What the choice for an input is remembered by: its pattern's fingerprint, the dense
/// width and the thread count.
type ChoiceKey = (String, usize, usize);

/// A compiled kernel, with what ran instead of the chosen candidate when it did not
/// apply: (recipe, note).
type Compiled = (Arc<Kernel>, Option<(String, String)>);

/// A call's key with the kernel it ran and the selection behind it.
type LastCall = (CallKey, Arc<Kernel>, Arc<Selection>);

/// An index-notation program whose format-preserving schedule is chosen per input
/// (database, selector, rule), or named once for every input.
///
/// ```no_run
/// use std::collections::HashMap;
/// # fn demo(inputs: &HashMap<String, sparsile::formats::SparseTensor<'_>>) -> Result<(), sparsile::CompileError> {
/// let k = sparsile::AutoKernel::new(
///     "tensor A: f32[m, n] csr\ntensor B: f32[n, k]\ntensor C: f32[m, k]\nC[i,k] = A[i,j] * B[j,k]\n",
/// )?;
/// let out = k.run(inputs, &sparsile::RunOptions::default())?;
/// println!("{} from the {}", k.last_selection().unwrap().candidate, k.last_selection().unwrap().source.name());
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct AutoKernel {
    program: String,
    info: OpInfo,
    hash: String,
    explicit: Option<String>,
    /// Where the kernels run; GPU targets run GPU recipes.
    target: Target,
    /// The GPU rule's recipes for the program (used on GPU targets): for a dense width
    /// of at most 32, and for wider ones (see [`super::gpu_rule_for`]).
    gpu_recipes: [&'static str; 2],
    /// The outputs with f16 or bf16 values (tensor name, type).
    half_outputs: Vec<(String, sparsile_ir::DType)>,
    /// The choices, and the tuning generation ([`super::tune::generation`]) they were
    /// made in: a tuning in this process makes them stale.
    choices: Mutex<(u64, HashMap<ChoiceKey, Selection>)>,
    kernels: Mutex<HashMap<String, Compiled>>,
    /// What the last call ran (shared with `last_call`, so that a repeated call sets it
    /// without copying the selection).
    last: Mutex<Option<Arc<Selection>>>,
    /// The last call's key, kernel and selection: a call with the same key runs them
    /// without choosing or looking the kernel up again.
    last_call: Mutex<Option<LastCall>>,
}

impl AutoKernel {
    /// Parses and checks `program`; nothing is compiled before the first call.
    pub fn new(program: &str) -> Result<AutoKernel, CompileError> {
        let ast = notation::parse(program)?;
        let stage1 = notation::lower(&ast)?;
        let half_outputs = super::widened::half_outputs(&ast, &stage1);
        Ok(AutoKernel {
            program: program.to_string(),
            info: classify(&stage1),
            hash: sparsile_tune::target::fingerprint(&[program.as_bytes()]),
            explicit: None,
            target: Target::Cpu,
            gpu_recipes: [
                super::gpu_rule_for(&stage1, Some(32)),
                super::gpu_rule_for(&stage1, Some(33)),
            ],
            half_outputs,
            choices: Mutex::new((0, HashMap::new())),
            kernels: Mutex::new(HashMap::new()),
            last: Mutex::new(None),
            last_call: Mutex::new(None),
        })
    }

    /// Like [`AutoKernel::new`], with recipe `spec` for every input (`"auto"` chooses).
    pub fn with_recipe(program: &str, spec: &str) -> Result<AutoKernel, CompileError> {
        let mut k = AutoKernel::new(program)?;
        if spec != "auto" {
            spec.parse::<crate::recipe::RecipeSpec>()
                .map_err(CompileError::from)?;
            k.explicit = Some(spec.to_string());
        }
        Ok(k)
    }

    /// [`AutoKernel::with_recipe`] for `target`. On a GPU target (`cuda`, `cuda-sim`) the
    /// recipe must be a GPU recipe; `"auto"` runs the GPU rule's (GPU kernels are not
    /// tuned yet: there is no database or selector for them).
    ///
    /// ```
    /// use std::collections::HashMap;
    /// use sparsile::formats::{CooTensor, Format, SparseTensor};
    /// use sparsile::ir::DType;
    /// let k = sparsile::AutoKernel::with_target(
    ///     "tensor A: f32[m, n] csr\ntensor x: f32[n]\ntensor y: f32[m]\ny[i] = A[i,j] * x[j]\n",
    ///     "auto",
    ///     sparsile::Target::CudaSim,
    /// ).unwrap();
    /// let a = CooTensor::from_triplets(vec![2, 2], &[(0, 1, 2.0), (1, 0, 3.0)]).unwrap();
    /// let inputs = HashMap::from([
    ///     ("A".to_string(), SparseTensor::from_coo_with(&a, &Format::Csr, DType::F32).unwrap()),
    ///     ("x".to_string(), SparseTensor::dense_from_f64(&[2], &[1.0, 1.0], DType::F32).unwrap()),
    /// ]);
    /// let y = &k.run(&inputs, &Default::default()).unwrap()["y"];
    /// assert_eq!(y.to_dense_f64(), vec![2.0, 3.0]);
    /// assert_eq!(k.last_selection().unwrap().candidate.recipe, "gpu_warp");
    /// ```
    pub fn with_target(
        program: &str,
        spec: &str,
        target: Target,
    ) -> Result<AutoKernel, CompileError> {
        let mut k = AutoKernel::with_recipe(program, spec)?;
        k.target = target;
        Ok(k)
    }

    /// Where the kernels run.
    pub fn target(&self) -> Target {
        self.target
    }

    /// The operator the program computes.
    pub fn op(&self) -> sparsile_tune::op::Operator {
        self.info.op
    }

    /// The program text.
    pub fn program(&self) -> &str {
        &self.program
    }

    /// The choice for `inputs` run with `threads` threads (remembered per input).
    pub fn select(&self, inputs: &HashMap<String, SparseTensor<'_>>, threads: usize) -> Selection {
        self.select_with(inputs, threads, &Settings::from_env())
    }

    /// [`AutoKernel::select`] with the settings already read (one read of the
    /// environment per call).
    fn select_with(
        &self,
        inputs: &HashMap<String, SparseTensor<'_>>,
        threads: usize,
        settings: &Settings,
    ) -> Selection {
        let ctx = Context {
            program: &self.hash,
            info: &self.info,
            threads,
            other_formats: false,
        };
        let remember = |s: &Selection| {
            s.key
                .as_ref()
                .map(|k| (k.pattern.clone(), s.width, threads))
        };
        let (_, width) = super::select::operands(&self.info, inputs);
        let gpu_rule = (self.explicit.is_none() && self.target.is_gpu())
            .then_some(self.gpu_recipes[usize::from(width > 32)]);
        if let Some(spec) = self.explicit.as_deref().or(gpu_rule) {
            let (sparse, _) = super::select::operands(&self.info, inputs);
            let format = sparse.map_or_else(|| "dense".to_string(), |t| t.format().to_string());
            return Selection {
                op: self.info.op,
                candidate: Candidate::new(format, spec.to_string()),
                source: if gpu_rule.is_some() {
                    Source::Rule
                } else {
                    Source::Explicit
                },
                features: None,
                key: None,
                note: gpu_rule.map(|_| {
                    "the GPU rule: GPU kernels have no tuning database or selector yet".to_string()
                }),
                width,
                trial: Vec::new(),
            };
        }
        // A cheap look-up first: the pattern memo makes the fingerprint free after the
        // first call on a structure.
        let (sparse, _) = super::select::operands(&self.info, inputs);
        if let Some(fp) = sparse
            .and_then(super::pattern::pattern)
            .and_then(|p| p.fingerprint)
        {
            let mut m = self.choices.lock().unwrap_or_else(|e| e.into_inner());
            let generation = super::tune::generation();
            if m.0 != generation {
                *m = (generation, HashMap::new());
            }
            if let Some(s) = m.1.get(&(fp, width, threads)) {
                return s.clone();
            }
        }
        let generation = super::tune::generation();
        let s = select(&ctx, inputs, settings);
        if let Some(k) = remember(&s) {
            let mut m = self.choices.lock().unwrap_or_else(|e| e.into_inner());
            if m.0 == generation {
                m.1.insert(k, s.clone());
            }
        }
        s
    }

    /// The kernel of `selection` for `inputs`, compiled on first use (a chosen recipe that
    /// does not apply falls back to the default schedule, noted in the returned
    /// selection; a recipe named by the caller is an error then).
    pub fn kernel(
        &self,
        inputs: &HashMap<String, SparseTensor<'_>>,
        selection: &Selection,
    ) -> Result<(Arc<Kernel>, Selection), CompileError> {
        let index: Vec<String> = {
            let mut v: Vec<String> = inputs
                .iter()
                .map(|(n, t)| {
                    let idx: Vec<String> = t
                        .structure
                        .axes
                        .iter()
                        .filter_map(|a| a.indices.as_ref().or(a.indptr.as_ref()))
                        .map(|a| a.index_type().to_string())
                        .collect();
                    format!("{n}:{}", idx.join(","))
                })
                .collect();
            v.sort();
            v
        };
        let widths: Vec<String> = {
            let mut v: Vec<String> = inputs
                .iter()
                .filter(|(_, t)| !t.structure.axes.iter().any(|a| a.kind.is_sparse()))
                .map(|(n, t)| format!("{n}:{:?}", t.shape()))
                .collect();
            v.sort();
            v
        };
        let key = format!(
            "{}|{}|{}",
            selection.candidate.recipe,
            index.join(";"),
            widths.join(";")
        );
        if let Some(k) = self
            .kernels
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&key)
        {
            let mut used = selection.clone();
            if let Some((recipe, note)) = &k.1 {
                used.candidate.recipe = recipe.clone();
                used.note = Some(note.clone());
            }
            return Ok((Arc::clone(&k.0), used));
        }
        let compiled = compile_recipe_for(
            &self.program,
            inputs,
            &selection.candidate.recipe,
            self.target,
        );
        let (kernel, used) = match compiled {
            Ok(k) => (k, selection.clone()),
            Err(e) if selection.source != Source::Explicit && !self.target.is_gpu() => {
                let mut s = selection.clone();
                let (kernel, ran) = if self.half_outputs.is_empty() {
                    // The schedule compiling without one applies (checked loops only).
                    let k = crate::compile::compile_for(&self.program, inputs)?;
                    (k, "the default schedule".to_string())
                } else {
                    // f16/bf16 outputs need their sums in f32 locals, which the default
                    // schedule does not make: `rowwise`, else f32 outputs rounded after.
                    let rowwise = (s.candidate.recipe != "rowwise")
                        .then(|| {
                            compile_recipe_for(&self.program, inputs, "rowwise", self.target).ok()
                        })
                        .flatten();
                    match rowwise {
                        Some(k) => {
                            s.candidate.recipe = "rowwise".into();
                            (k, "rowwise".to_string())
                        }
                        None => (
                            super::widened::compile(&self.program, inputs)?,
                            "the default schedule with f32 outputs, rounded after the run"
                                .to_string(),
                        ),
                    }
                };
                s.note = Some(format!("{} did not apply ({e}); ran {ran}", s.candidate));
                if s.candidate.recipe != "rowwise" {
                    s.candidate.recipe = "default".into();
                }
                (kernel, s)
            }
            Err(e) => return Err(e),
        };
        let kernel = Arc::new(kernel);
        let fallback = (used.note != selection.note).then(|| {
            (
                used.candidate.recipe.clone(),
                used.note.clone().unwrap_or_default(),
            )
        });
        self.kernels
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key, (Arc::clone(&kernel), fallback));
        Ok((kernel, used))
    }

    /// Runs the program on `inputs` with the chosen kernel.
    pub fn run(
        &self,
        inputs: &HashMap<String, SparseTensor<'_>>,
        options: &RunOptions,
    ) -> Result<Outputs, CompileError> {
        let mut out = Outputs::new();
        self.run_into(inputs, &mut out, options)?;
        Ok(out)
    }

    /// [`AutoKernel::run`] into `outputs`, reusing their storage (see
    /// [`Kernel::run_into`]).
    pub fn run_into(
        &self,
        inputs: &HashMap<String, SparseTensor<'_>>,
        outputs: &mut Outputs,
        options: &RunOptions,
    ) -> Result<(), CompileError> {
        // The environment is read only when something needs it: reading the dozen
        // variables of the settings costs about a microsecond, and a repeated call with
        // its thread count given (as Python's calls are) needs none of them.
        let threads = options
            .threads
            .unwrap_or_else(|| sparsile_runtime::jit::default_threads(&Settings::from_env()));
        let generation = super::tune::generation();
        let repeated = {
            let last = self.last_call.lock().unwrap_or_else(|e| e.into_inner());
            last.as_ref()
                .filter(|(key, _, _)| key.matches(inputs, threads, generation))
                .map(|(_, kernel, used)| (Arc::clone(kernel), Arc::clone(used)))
        };
        let kernel = match repeated {
            Some((kernel, used)) => {
                *self.last.lock().unwrap_or_else(|e| e.into_inner()) = Some(used);
                kernel
            }
            None => {
                let mut selection = self.select_with(inputs, threads, &Settings::from_env());
                if selection.trial.len() > 1 {
                    selection = self.settle(inputs, outputs, options, selection, threads);
                }
                let (kernel, used) = self.kernel(inputs, &selection)?;
                let used = Arc::new(used);
                if let Some(key) = CallKey::of(inputs, threads, generation) {
                    *self.last_call.lock().unwrap_or_else(|e| e.into_inner()) =
                        Some((key, Arc::clone(&kernel), Arc::clone(&used)));
                }
                *self.last.lock().unwrap_or_else(|e| e.into_inner()) = Some(used);
                kernel
            }
        };
        super::widened::run_into(&kernel, inputs, outputs, options, &self.half_outputs)
    }

    /// Times `selection`'s short list on `inputs` (each candidate's kernel compiled and
    /// run into `outputs`, which the call's own run overwrites after), and remembers and
    /// returns the selection of the fastest (see [`sparsile_tune::trial`]). A candidate
    /// that does not compile, or falls back to another schedule, is left out.
    fn settle(
        &self,
        inputs: &HashMap<String, SparseTensor<'_>>,
        outputs: &mut Outputs,
        options: &RunOptions,
        mut selection: Selection,
        threads: usize,
    ) -> Selection {
        let t0 = std::time::Instant::now();
        let ready: Vec<(Candidate, Arc<Kernel>)> = selection
            .trial
            .iter()
            .filter_map(|c| {
                let mut s = selection.clone();
                s.candidate = c.clone();
                let (k, used) = self.kernel(inputs, &s).ok()?;
                (used.candidate == *c).then(|| (c.clone(), k))
            })
            .collect();
        let outcome = sparsile_tune::trial::settle(ready.len(), |i| {
            let t = std::time::Instant::now();
            super::widened::run_into(&ready[i].1, inputs, outputs, options, &self.half_outputs)
                .ok()?;
            Some(t.elapsed().as_secs_f64())
        });
        let timed: Vec<String> = ready
            .iter()
            .zip(&outcome.medians)
            .map(|((c, _), m)| match m {
                Some(m) => format!("{c} {:.3} ms", m * 1e3),
                None => format!("{c} failed"),
            })
            .collect();
        if let Some((winner, _)) = ready.get(outcome.winner) {
            let duel = match outcome.duel {
                Some([Some(p), Some(c)]) => format!(
                    "; the fastest against the pick alone: {:.3} ms against {:.3} ms",
                    c * 1e3,
                    p * 1e3
                ),
                _ => String::new(),
            };
            let note = format!(
                "timed against the selector's close predictions in {:.0} ms, compiles included (medians of {} rounds: {}{duel})",
                t0.elapsed().as_secs_f64() * 1e3,
                outcome.rounds,
                timed.join(", ")
            );
            selection.add_note(note);
            selection.candidate = winner.clone();
        }
        selection.trial.clear();
        if let Some(k) = &selection.key {
            let mut m = self.choices.lock().unwrap_or_else(|e| e.into_inner());
            if m.0 == super::tune::generation() {
                m.1.insert(
                    (k.pattern.clone(), selection.width, threads),
                    selection.clone(),
                );
            }
        }
        selection
    }

    /// [`AutoKernel::run`] on operands in device memory, for the `cuda` target (see
    /// [`Kernel::run_device`]): the choice and the compiled kernel depend only on the
    /// inputs' structures and shapes, so values in device memory are never read on the
    /// host.
    pub fn run_device(
        &self,
        inputs: &HashMap<String, DeviceInput<'_>>,
        alloc: &mut dyn FnMut(&OutputSpec) -> Result<DeviceArray, String>,
        stream: CudaStream,
        options: &RunOptions,
    ) -> Result<HashMap<String, DeviceOutput>, CompileError> {
        if self.target != Target::Cuda {
            return Err(CompileError::Target(format!(
                "operands in device memory run on the cuda target; this kernel's target is {}",
                self.target
            )));
        }
        // Views of the structures (and host values, where there are any): what the
        // choice and the compiler read.
        let views: HashMap<String, SparseTensor<'_>> = inputs
            .iter()
            .map(|(n, i)| (n.clone(), i.host_view()))
            .collect();
        let settings = Settings::from_env();
        let threads = options
            .threads
            .unwrap_or_else(|| sparsile_runtime::jit::default_threads(&settings));
        let selection = self.select_with(&views, threads, &settings);
        let (kernel, used) = self.kernel(&views, &selection)?;
        drop(views);
        *self.last.lock().unwrap_or_else(|e| e.into_inner()) = Some(Arc::new(used));
        kernel.run_device(inputs, alloc, stream, options)
    }

    /// The choice the last call ran.
    pub fn last_selection(&self) -> Option<Selection> {
        self.last
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_deref()
            .cloned()
    }
}
