//! Python handler: runs `main.py` with CPython 3, installs libraries with pip into the
//! sandbox's working directory, captures matplotlib (and seaborn) figures as PNG files
//! and plotly figures as HTML pages.
#![no_std]

extern crate alloc;

use alloc::string::{String, ToString};
use alloc::vec::Vec;
use alloc::{format, vec};
use sandlot_handler_kit::*;

mod analysis;

struct Python;

/// Where pip installs libraries, relative to the working directory. The root filesystem
/// of a sandbox is read-only, so libraries live next to the code.
const SITE: &str = ".sandlot/python";

impl Guest for Python {
    fn info() -> LanguageInfo {
        LanguageInfo {
            id: "python".into(),
            aliases: vec!["py".into(), "python3".into()],
            display_name: "Python 3".into(),
            file_extension: "py".into(),
            default_image: "sandlot/python:latest".into(),
            capabilities: vec![
                Capability::InstallLibraries,
                Capability::CapturePlots,
                Capability::Interactive,
            ],
            version: env!("CARGO_PKG_VERSION").into(),
        }
    }

    fn plan(code: String, libraries: Vec<String>, options: PlanOptions) -> Result<Plan, String> {
        let mut commands = Self::install(libraries, options.workdir.clone())?;
        let prelude = options
            .capture_plots
            .then(|| Self::plot_prelude(options.output_dir.clone()))
            .flatten();
        let source = prepend(prelude, &code);
        let site = join(&options.workdir, SITE);
        commands.push(
            command(Phase::Run, &["python3", "-u", "main.py"])
                .args(&options.args)
                .env("PYTHONPATH", &site)
                .env("PYTHONDONTWRITEBYTECODE", "1")
                .env("MPLBACKEND", "Agg"),
        );
        Ok(Plan {
            files: vec![file("main.py", source)],
            commands,
        })
    }

    fn install(libraries: Vec<String>, workdir: String) -> Result<Vec<Command>, String> {
        if libraries.is_empty() {
            return Ok(Vec::new());
        }
        // A requirement specifier: name, extras, version constraints. No URLs, no
        // paths, no options.
        check_libraries(&libraries, "Python", |l| only(l, "._-[],<>=!~*+ "))?;
        Ok(vec![command(
            Phase::Install,
            &[
                "python3",
                "-m",
                "pip",
                "install",
                "--quiet",
                "--no-input",
                "--disable-pip-version-check",
                "--no-cache-dir",
                "--target",
                &join(&workdir, SITE),
            ],
        )
        .args(&libraries)
        .network()])
    }

    fn plot_prelude(output_dir: String) -> Option<String> {
        Some(PRELUDE.replace("@OUTPUT_DIR@", &python_string(&output_dir)))
    }

    fn plot_flush(_output_dir: String) -> Option<String> {
        // The prelude registers its saver where this finds it.
        Some(
            "import sys as _sl_sys\nif hasattr(_sl_sys, '_sandlot_save_figures'):\n    \
             _sl_sys._sandlot_save_figures()\ndel _sl_sys\n"
                .into(),
        )
    }

    fn may_plot(code: String) -> bool {
        [
            "plot",
            "plt",
            "matplotlib",
            "seaborn",
            "figure",
            "hist",
            "savefig",
        ]
        .iter()
        .any(|word| code.contains(word))
    }

    fn kernel(options: KernelOptions) -> Option<KernelSpec> {
        Some(kernel_spec(
            KERNEL,
            "kernel.py",
            &["python3", "-u", "{driver}"],
            vec![
                ("PYTHONPATH".into(), join(&options.workdir, SITE)),
                ("PYTHONDONTWRITEBYTECODE".into(), "1".into()),
                ("MPLBACKEND".into(), "Agg".into()),
            ],
        ))
    }

    fn analyze(code: String, restricted: Vec<Restriction>) -> Vec<Finding> {
        analysis::analyze(&code, &restricted)
    }
}

/// The kernel's driver: runs cells in one interpreter, shows a final expression's
/// value as a notebook does, turns SIGINT into `KeyboardInterrupt` inside a cell.
const KERNEL: &str = include_str!("kernel.py");

/// `s` as a Python string literal.
fn python_string(s: &str) -> String {
    let mut out = "'".to_string();
    for c in s.chars() {
        match c {
            '\\' | '\'' => out.push_str(&format!("\\{c}")),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out.push('\'');
    out
}

/// Saves every open matplotlib figure as `plot-NNN.png` when the program calls
/// `plt.show()`, and when the run ends with figures still open, except one saved into
/// the output directory and not drawn on since (it is there already: a plot comes back
/// once). A plotly figure's `show()` writes `plot-NNN.html`. Numbers continue after
/// the plots earlier runs left. The libraries are patched only when the program imports
/// them, so programs without plots do not pay for importing them.
const PRELUDE: &str = r#"def _sandlot_capture_plots(out):
    import atexit, os, sys
    os.environ["MPLBACKEND"] = "Agg"
    taken = [None]
    def next_path(extension):
        # Numbered after the plots earlier runs left: a run never overwrites them.
        if taken[0] is None:
            taken[0] = 0
            for name in os.listdir(out):
                stem, dot, ext = name.partition(".")
                if stem.startswith("plot-") and stem[5:].isdigit():
                    taken[0] = max(taken[0], int(stem[5:]))
        taken[0] += 1
        return os.path.join(out, "plot-%03d.%s" % (taken[0], extension))
    def inside_out(target):
        try:
            path = os.path.realpath(os.fspath(target))
        except TypeError:
            return False
        real = os.path.realpath(out)
        return os.path.commonpath([path, real]) == real
    def save_figures(*_args, **_kwargs):
        plt = sys.modules.get("matplotlib.pyplot")
        if plt is None:
            return
        for num in plt.get_fignums():
            figure = plt.figure(num)
            # Saved into the output directory and not drawn on since: it is there.
            if getattr(figure, "_sandlot_saved", False) and not figure.stale:
                continue
            figure.savefig(next_path("png"))
        plt.close("all")
    def patch_pyplot(module):
        module.show = save_figures
        figure = sys.modules["matplotlib.figure"].Figure
        savefig = figure.savefig
        def tracked_savefig(self, fname, *args, **kwargs):
            result = savefig(self, fname, *args, **kwargs)
            self._sandlot_saved = inside_out(fname)
            # Drawing can leave a figure stale (autoscaling bars does): from here on,
            # stale means drawn on since it was saved.
            self.stale = False
            return result
        figure.savefig = tracked_savefig
        # Registered after pyplot's own exit handler, so it runs before matplotlib
        # closes the figures left open.
        atexit.register(save_figures)
    def patch_plotly(module):
        def show(figure, *_args, **_kwargs):
            # The page loads plotly.js from its CDN: a few kilobytes, not megabytes.
            module.write_html(figure, next_path("html"), include_plotlyjs="cdn")
        module.show = show
    patches = {"matplotlib.pyplot": patch_pyplot, "plotly.io": patch_plotly}
    class Hook:
        def find_spec(self, name, path=None, target=None):
            if name not in patches or getattr(self, "busy", False):
                return None
            # Imported here, not up front: it costs milliseconds, and most programs
            # never plot.
            import importlib.util
            self.busy = True
            try:
                spec = importlib.util.find_spec(name)
            finally:
                self.busy = False
            if spec is None or spec.loader is None:
                return spec
            spec.loader = Loader(spec.loader, patches.pop(name))
            if not patches:
                sys.meta_path.remove(self)
            return spec
    class Loader:
        # Wraps the real loader (which may be shared, e.g. a zipimporter) for the one
        # module it patches.
        def __init__(self, inner, patch):
            self.inner = inner
            self.patch = patch
        def __getattr__(self, name):
            return getattr(self.inner, name)
        def create_module(self, spec):
            return self.inner.create_module(spec)
        def exec_module(self, module):
            self.inner.exec_module(module)
            self.patch(module)
    os.makedirs(out, exist_ok=True)
    sys.meta_path.insert(0, Hook())
    # Sessions that outlive one run (a kernel, the wasm backend) save left-open
    # figures after each run through this.
    sys._sandlot_save_figures = save_figures
_sandlot_capture_plots(@OUTPUT_DIR@)
del _sandlot_capture_plots
"#;

export_handler!(Python);
