//! Each built-in language handler plans a realistic program correctly.
//!
//! Where the language's toolchain is on every machine of the kind sandlot is built on
//! (python3, node, javac, g++, bash), the plan is also carried out for real in a
//! temporary directory, so the commands are proven, not just pattern-matched. On a
//! machine without one, that part is left out and the suite says so; CI, whose
//! `tests/run.sh` installs them, fails instead.

mod support;

use sandlot::{
    Error, Phase, Plan, PlanOptions, PluginHost, Restriction, RestrictionKind, Severity,
};
use std::path::Path;
use std::sync::OnceLock;
use support::needs::{needs, Need};

fn host() -> &'static PluginHost {
    static HOST: OnceLock<PluginHost> = OnceLock::new();
    HOST.get_or_init(|| PluginHost::builder().no_cache().load().unwrap())
}

fn options(workdir: &Path) -> PlanOptions {
    PlanOptions {
        workdir: workdir.to_str().unwrap().into(),
        output_dir: workdir.join("output").to_str().unwrap().into(),
        capture_plots: true,
        args: vec!["first arg".into(), "second".into()],
    }
}

fn plan(language: &str, code: &str, libraries: &[&str], workdir: &Path) -> Plan {
    let libraries: Vec<String> = libraries.iter().map(|l| l.to_string()).collect();
    host()
        .language(language)
        .unwrap()
        .plan(code, &libraries, &options(workdir))
        .unwrap()
}

fn argvs(plan: &Plan) -> Vec<String> {
    plan.commands.iter().map(|c| c.argv.join(" ")).collect()
}

/// Writes the plan's files into `workdir` and runs its commands there in order, as a
/// backend would, stopping at the first failure. Returns the last command's stdout.
fn execute(plan: &Plan, workdir: &Path) -> String {
    for file in &plan.files {
        let path = workdir.join(&file.path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, &file.contents).unwrap();
    }
    let mut stdout = String::new();
    for command in &plan.commands {
        let output = std::process::Command::new(&command.argv[0])
            .args(&command.argv[1..])
            .envs(command.env.iter().map(|(k, v)| (k, v)))
            .current_dir(workdir)
            .output()
            .unwrap_or_else(|e| panic!("cannot start {:?}: {e}", command.argv));
        assert!(
            output.status.success(),
            "{:?} failed: {}",
            command.argv,
            String::from_utf8_lossy(&output.stderr)
        );
        stdout = String::from_utf8(output.stdout).unwrap();
    }
    stdout
}

#[test]
fn python_installs_with_pip_into_the_sandbox_and_runs_unbuffered() {
    let dir = tempfile::tempdir().unwrap();
    let code = "import sys\nprint('sum', sum(range(10)), sys.argv[1:])\n";
    let plan = plan("python", code, &["numpy", "pandas>=2.0"], dir.path());
    let workdir = dir.path().to_str().unwrap();
    assert_eq!(
        argvs(&plan),
        [
            format!(
                "python3 -m pip install --quiet --no-input --disable-pip-version-check \
                 --no-cache-dir --target {workdir}/.sandlot/python numpy pandas>=2.0"
            ),
            "python3 -u main.py first arg second".to_string(),
        ]
    );
    assert_eq!(plan.commands[0].phase, Phase::Install);
    assert!(plan.commands[0].needs_network);
    assert!(!plan.commands[1].needs_network);
    let run_env = &plan.commands[1].env;
    assert!(run_env.contains(&("PYTHONPATH".into(), format!("{workdir}/.sandlot/python"))));
    assert_eq!(plan.files.len(), 1);
    assert_eq!(plan.files[0].path, "main.py");
    assert!(plan.files[0].text().unwrap().ends_with(code));
    assert!(plan.files[0]
        .text()
        .unwrap()
        .contains(&format!("{workdir}/output")));

    // Without libraries, the plan runs for real, prelude included.
    if !needs(&[Need::Program("python3")]) {
        return;
    }
    let plan = self::plan("python", code, &[], dir.path());
    assert_eq!(
        execute(&plan, dir.path()),
        "sum 45 ['first arg', 'second']\n"
    );
}

#[test]
fn python_plot_prelude_saves_shown_and_left_open_figures_as_png() {
    if !needs(&[Need::Program("python3"), Need::PythonModule("matplotlib")]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let code = "import matplotlib.pyplot as plt\n\
                plt.plot([1, 2, 3], [4, 1, 9])\n\
                plt.show()\n\
                plt.figure()\n\
                plt.bar([1, 2], [3, 4])\n\
                print('done')\n";
    let mut plan = plan("python", code, &[], dir.path());
    plan.commands[0].argv.truncate(3); // no program arguments
    assert_eq!(execute(&plan, dir.path()), "done\n");
    let mut plots: Vec<_> = std::fs::read_dir(dir.path().join("output"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    plots.sort();
    let names: Vec<_> = plots
        .iter()
        .map(|p| p.file_name().unwrap().to_owned())
        .collect();
    assert_eq!(names, ["plot-001.png", "plot-002.png"]);
    for plot in plots {
        let bytes = std::fs::read(plot).unwrap();
        assert!(bytes.starts_with(b"\x89PNG\r\n\x1a\n") && bytes.len() > 1000);
    }

    // A program without plots does not pay for importing matplotlib.
    let plan = self::plan(
        "python",
        "import sys\nprint('matplotlib' in sys.modules)\n",
        &[],
        dir.path(),
    );
    assert_eq!(execute(&plan, dir.path()), "False\n");
}

#[test]
fn python_plot_prelude_is_left_out_when_not_asked_for() {
    let python = host().language("python").unwrap();
    let options = PlanOptions {
        capture_plots: false,
        ..PlanOptions::default()
    };
    let plan = python.plan("print(1)", &[], &options).unwrap();
    assert_eq!(plan.files[0].text(), Some("print(1)"));
    let prelude = python.plot_prelude("/out/it's").unwrap().unwrap();
    assert!(prelude.contains(r"'/out/it\'s'"), "{prelude}");
}

/// The host reads library names whatever a handler made of them: what pip would take
/// for an option, an address, a path or an archive is refused (by the handler's own
/// check, or by the host's with the installer's name), `install` as well as `plan`;
/// an archive's name, which the handler takes, the host refuses.
#[test]
fn library_names_that_are_options_urls_or_paths_never_reach_an_installer() {
    let python = host().language("python").unwrap();
    for bad in [
        "--index-url=http://evil.example",
        "https://evil.example/x.whl",
        "a;b",
        "./pkg",
        "pkg.tar.gz",
        "",
    ] {
        let err = python
            .plan("print(1)", &[bad.to_string()], &PlanOptions::default())
            .unwrap_err();
        assert!(
            matches!(&err, Error::InvalidLibrary { library, installer, .. }
                if library == bad && installer == "pip")
                || matches!(&err, Error::Refused { .. }),
            "{bad}: {err}"
        );
        assert!(python.install(&[bad.to_string()], "/workspace").is_err());
    }
    let archive = python
        .install(&["pkg.tar.gz".into()], "/workspace")
        .unwrap_err();
    assert!(matches!(archive, Error::InvalidLibrary { .. }), "{archive}");
    assert!(archive.to_string().contains("archive"), "{archive}");
    let npm = host().language("typescript").unwrap();
    let err = npm
        .install(&["user/repo".into()], "/workspace")
        .unwrap_err();
    assert!(err.to_string().contains("GitHub repository"), "{err}");
}

#[test]
fn javascript_installs_with_npm_next_to_the_program() {
    let dir = tempfile::tempdir().unwrap();
    let code = "const args = process.argv.slice(2);\nconsole.log(JSON.stringify({ n: [1, 2, 3].reduce((a, b) => a + b), args }));\n";
    let plan = plan("js", code, &["lodash@4.17.21"], dir.path());
    // npm installs into the installer's own home, then the packages are copied next to
    // the program; the working directory and the names are the script's arguments.
    let install = &plan.commands[0].argv;
    assert_eq!(install[..2], ["sh", "-c"]);
    assert!(install[2].contains("--prefix \"$stage\"") && install[2].contains("$HOME"));
    let workdir = dir.path().to_string_lossy();
    assert_eq!(install[3..], ["npm-install", &workdir, "lodash@4.17.21"]);
    assert_eq!(argvs(&plan)[1], "node main.js first arg second");
    assert!(plan.commands[0].needs_network);

    if !needs(&[Need::Program("node")]) {
        return;
    }
    let plan = self::plan("javascript", code, &[], dir.path());
    assert_eq!(
        execute(&plan, dir.path()),
        "{\"n\":6,\"args\":[\"first arg\",\"second\"]}\n"
    );
}

#[test]
fn typescript_type_checks_then_runs_the_compiled_program() {
    let dir = tempfile::tempdir().unwrap();
    let code = "const xs: number[] = [1, 2, 3];\nconsole.log(xs.map((x) => x * 2));\n";
    let plan = plan("ts", code, &[], dir.path());
    assert_eq!(plan.files[0].path, "main.ts");
    assert_eq!(
        argvs(&plan),
        [
            "tsc --target es2022 --module commonjs --esModuleInterop --skipLibCheck \
             --typeRoots /usr/local/lib/node_modules/@types --outDir .sandlot/ts main.ts",
            "node .sandlot/ts/main.js first arg second",
        ]
    );
    assert_eq!(plan.commands[0].phase, Phase::Build);
}

#[test]
fn java_names_the_file_after_the_public_class_and_honours_packages() {
    let dir = tempfile::tempdir().unwrap();
    let code = r#"package demo.app;

import java.util.List;

final class Helper { static int twice(int x) { return 2 * x; } }

public class Greeter {
    public static void main(String[] args) {
        System.out.println("hello " + Helper.twice(21) + " " + List.of(args));
    }
}
"#;
    let plan = plan("java", code, &[], dir.path());
    assert_eq!(plan.files[0].path, "Greeter.java");
    assert_eq!(
        argvs(&plan),
        [
            "javac -encoding UTF-8 -d . Greeter.java",
            "java -cp . demo.app.Greeter first arg second",
        ]
    );
    if needs(&[Need::Program("javac"), Need::Program("java")]) {
        assert_eq!(execute(&plan, dir.path()), "hello 42 [first arg, second]\n");
    }

    // No public class: the first class; no class at all: Main.
    let plan = self::plan(
        "java",
        "class Solution { public static void main(String[] a) {} }",
        &[],
        dir.path(),
    );
    assert_eq!(plan.files[0].path, "Solution.java");
    let plan = self::plan("java", "// nothing here", &[], dir.path());
    assert_eq!(plan.files[0].path, "Main.java");
}

#[test]
fn java_cannot_install_libraries_and_says_so() {
    let java = host().language("java").unwrap();
    let err = java
        .install(&["com.google.guava:guava:33.0.0-jre".into()], "/w")
        .unwrap_err();
    assert!(
        err.to_string().contains("cannot install libraries"),
        "{err}"
    );
}

#[test]
fn cpp_compiles_with_gxx_then_runs_the_binary() {
    let dir = tempfile::tempdir().unwrap();
    let code = r#"#include <iostream>
#include <numeric>
#include <vector>
int main(int argc, char** argv) {
    std::vector<int> v(10);
    std::iota(v.begin(), v.end(), 1);
    std::cout << std::accumulate(v.begin(), v.end(), 0) << " " << argc - 1 << std::endl;
}
"#;
    let plan = plan("c++", code, &[], dir.path());
    assert_eq!(
        argvs(&plan),
        [
            "g++ -std=c++17 -O2 -pipe -Wall -o main main.cpp -pthread -lm",
            "./main first arg second",
        ]
    );
    assert_eq!(
        plan.commands.iter().map(|c| c.phase).collect::<Vec<_>>(),
        [Phase::Build, Phase::Run]
    );
    if !needs(&[Need::Program("g++")]) {
        return;
    }
    assert_eq!(execute(&plan, dir.path()), "55 2\n");
}

#[test]
fn go_sets_up_a_module_so_go_get_works() {
    let dir = tempfile::tempdir().unwrap();
    let code = "package main\n\nimport (\n\t\"fmt\"\n\t\"github.com/google/uuid\"\n)\n\nfunc main() { fmt.Println(uuid.NewString()) }\n";
    let plan = plan(
        "golang",
        code,
        &["github.com/google/uuid@v1.6.0"],
        dir.path(),
    );
    let argvs = argvs(&plan);
    assert_eq!(
        argvs[0],
        "sh -c test -f go.mod || exec go mod init sandlot.local/main"
    );
    assert_eq!(
        argvs[2..],
        ["go build -o main .", "./main first arg second"]
    );
    // The install is a script; the working directory and the module names are its
    // arguments.
    assert_eq!(plan.commands[1].argv[..2], ["sh", "-c"]);
    assert_eq!(
        plan.commands[1].argv[3..],
        [
            "go-get",
            &dir.path().to_string_lossy(),
            "github.com/google/uuid@v1.6.0"
        ]
    );
    assert_eq!(
        plan.commands.iter().map(|c| c.phase).collect::<Vec<_>>(),
        [Phase::Setup, Phase::Install, Phase::Build, Phase::Run]
    );
    assert!(plan.commands[1].needs_network);
    let workdir = dir.path().to_str().unwrap();
    for command in &plan.commands[..3] {
        assert!(command
            .env
            .contains(&("GOPATH".into(), format!("{workdir}/.sandlot/go"))));
        assert!(command
            .env
            .contains(&("GOTOOLCHAIN".into(), "local".into())));
    }
}

/// A Go module proxy on loopback that serves `modules` (path, Go source) at v1.0.0 and
/// writes the path of every request to `log`. Python's http.server, so the test needs
/// nothing but the toolchains the handler tests already use.
struct GoProxy {
    child: std::process::Child,
    url: String,
    log: std::path::PathBuf,
}

impl GoProxy {
    fn start(root: &Path, modules: &[(&str, &str)]) -> GoProxy {
        for (module, source) in modules {
            let dir = root.join(module).join("@v");
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(dir.join("list"), "v1.0.0\n").unwrap();
            std::fs::write(dir.join("v1.0.0.info"), "{\"Version\":\"v1.0.0\"}").unwrap();
            std::fs::write(dir.join("v1.0.0.mod"), format!("module {module}\n")).unwrap();
            let zipped = std::process::Command::new("python3")
                .args([
                    "-c",
                    "import sys, zipfile\n\
                     out, module, source = sys.argv[1:]\n\
                     with zipfile.ZipFile(out, 'w') as z:\n\
                     \x20   z.writestr(module + '@v1.0.0/go.mod', 'module ' + module + '\\n')\n\
                     \x20   z.writestr(module + '@v1.0.0/lib.go', source)\n",
                    dir.join("v1.0.0.zip").to_str().unwrap(),
                    module,
                    source,
                ])
                .status()
                .unwrap();
            assert!(zipped.success());
        }
        let log = root.join("requests.log");
        let mut child = std::process::Command::new("python3")
            .args([
                "-u",
                "-c",
                "import functools, http.server, sys\n\
                 root, log = sys.argv[1:]\n\
                 class Handler(http.server.SimpleHTTPRequestHandler):\n\
                 \x20   def log_message(self, *args):\n\
                 \x20       open(log, 'a').write(self.path + '\\n')\n\
                 server = http.server.ThreadingHTTPServer(('127.0.0.1', 0),\n\
                 \x20   functools.partial(Handler, directory=root))\n\
                 print(server.server_address[1], flush=True)\n\
                 server.serve_forever()\n",
                root.to_str().unwrap(),
                log.to_str().unwrap(),
            ])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut port = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(child.stdout.as_mut().unwrap()),
            &mut port,
        )
        .unwrap();
        GoProxy {
            child,
            url: format!("http://127.0.0.1:{}", port.trim()),
            log,
        }
    }

    fn requests(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for GoProxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs the plan's commands as the container backends do: an install gets a fresh
/// home of its own and the session's environment (here, where the proxy is). Returns
/// each command's exit status and output.
fn execute_go(plan: &Plan, workdir: &Path, proxy: &str) -> Vec<(bool, String)> {
    for file in &plan.files {
        std::fs::write(workdir.join(&file.path), &file.contents).unwrap();
    }
    let mut results = Vec::new();
    for command in &plan.commands {
        let home = tempfile::tempdir().unwrap();
        let output = std::process::Command::new(&command.argv[0])
            .args(&command.argv[1..])
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap())
            .env("HOME", home.path())
            .env("GOPROXY", proxy)
            .env("GOSUMDB", "off")
            .envs(command.env.iter().map(|(k, v)| (k, v)))
            .current_dir(workdir)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&output.stdout).to_string()
            + &String::from_utf8_lossy(&output.stderr);
        results.push((output.status.success(), text));
        if !output.status.success() {
            break;
        }
    }
    results
}

/// Earlier code of a Go session can rewrite the session's `go.mod` and add a
/// `go.work`: a `replace` or `require` there would send a later install, online, to
/// a module (a host, a path carrying data) of its choosing. The install downloads in a
/// module of its own, so only what was asked for goes out; the session's own files
/// then apply offline.
#[test]
fn go_installs_download_only_what_was_asked_for_whatever_the_sessions_module_says() {
    if !needs(&[Need::Program("go"), Need::Program("python3")]) {
        return;
    }
    let proxy_root = tempfile::tempdir().unwrap();
    let proxy = GoProxy::start(
        proxy_root.path(),
        &[
            (
                "example.com/greet",
                "package greet\n\nfunc Hello() string { return \"hello\" }\n",
            ),
            (
                "leak.example/data",
                "package greet\n\nfunc Hello() string { return \"planted\" }\n",
            ),
        ],
    );
    let code = "package main\n\nimport (\n\t\"fmt\"\n\t\"example.com/greet\"\n)\n\n\
                func main() { fmt.Println(greet.Hello()) }\n";

    // Untouched, the install works and the program builds and runs offline.
    let dir = tempfile::tempdir().unwrap();
    let plan = plan("go", code, &["example.com/greet@v1.0.0"], dir.path());
    let results = execute_go(&plan, dir.path(), &proxy.url);
    assert!(results.iter().all(|(ok, _)| *ok), "{results:?}");
    assert_eq!(results.last().unwrap().1, "hello\n");
    let go_mod = std::fs::read_to_string(dir.path().join("go.mod")).unwrap();
    assert!(go_mod.contains("example.com/greet v1.0.0"), "{go_mod}");
    assert!(proxy
        .requests()
        .contains("/example.com/greet/@v/v1.0.0.zip"));
    assert!(
        std::fs::read_dir(dir.path().join(".sandlot/go/pkg/mod/example.com"))
            .unwrap()
            .count()
            > 0,
        "the module is in the session's own cache"
    );

    // Planted: the session's module swaps the library for another module and requires
    // one more; a go.work names a directory module.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("go.mod"),
        "module sandlot.local/main\n\ngo 1.19\n\nrequire leak.example/data v1.0.0\n\n\
         replace example.com/greet => leak.example/data v1.0.0\n",
    )
    .unwrap();
    std::fs::write(dir.path().join("go.work"), "go 1.19\n\nuse .\n").unwrap();
    let plan = self::plan("go", code, &["example.com/greet@v1.0.0"], dir.path());
    let results = execute_go(&plan, dir.path(), &proxy.url);
    let requests = proxy.requests();
    assert!(
        !requests.contains("leak.example"),
        "the planted module went out: {requests}"
    );
    // Installing against the planted module file fails offline, saying what it lacked.
    let (ok, output) = results.last().unwrap();
    assert!(!ok, "{results:?}");
    assert!(output.contains("leak.example/data"), "{output}");
}

#[test]
fn r_installs_packages_with_install_packages_and_saves_plots_as_png() {
    let dir = tempfile::tempdir().unwrap();
    let code = "x <- rnorm(100)\nhist(x)\nprint(mean(x))\n";
    let plan = plan("r", code, &["ggplot2", "data.table"], dir.path());
    let workdir = dir.path().to_str().unwrap();
    assert_eq!(plan.commands.len(), 2);
    let install = &plan.commands[0];
    // --vanilla: no profile earlier code planted is read.
    assert_eq!(install.argv[..3], ["Rscript", "--vanilla", "-e"]);
    let script = &install.argv[3];
    assert!(
        script.contains("pkgs <- c(\"ggplot2\", \"data.table\")"),
        "{script}"
    );
    assert!(
        script.contains(&format!("lib <- \"{workdir}/.sandlot/R\"")),
        "{script}"
    );
    // Into the installer's own home, seeing only R's own library, then copied.
    assert!(
        script.contains("install.packages(pkgs, lib = stage"),
        "{script}"
    );
    assert!(script.contains(".libPaths(stage)"), "{script}");
    assert!(
        script.contains("file.copy(file.path(stage, d), lib"),
        "{script}"
    );
    assert!(
        script.contains("quit(status = 1)"),
        "a failed install must fail: {script}"
    );
    assert_eq!(argvs(&plan)[1], "Rscript main.R first arg second");
    assert!(plan.commands[1]
        .env
        .contains(&("R_LIBS_USER".into(), format!("{workdir}/.sandlot/R"))));
    let source = plan.files[0].text().unwrap();
    // Every device draws PNG pages, numbered into the output directory on close.
    assert!(
        source.contains("options(device = function(...) {"),
        "{source}"
    );
    assert!(source.contains("grDevices::png("), "{source}");
    assert!(source.contains("onexit = TRUE"), "{source}");
    assert!(source.ends_with(code));

    // A name that could break out of the R string is refused.
    let err = host()
        .language("r")
        .unwrap()
        .install(&["x\"); system(\"id".into()], workdir)
        .unwrap_err();
    assert!(matches!(err, Error::Refused { .. }), "{err}");
}

#[test]
fn ruby_installs_gems_into_the_sandbox() {
    let dir = tempfile::tempdir().unwrap();
    let plan = plan(
        "rb",
        "require 'json'\nputs JSON.generate({a: 1})\n",
        &["colorize:1.1.0"],
        dir.path(),
    );
    let workdir = dir.path().to_str().unwrap();
    // The gems install into the installer's own home, seeing no other gems, then are
    // copied into the session's directory; the directory and names are arguments.
    let install = &plan.commands[0].argv;
    assert_eq!(install[..2], ["sh", "-c"]);
    assert!(install[2].contains("GEM_HOME=\"$stage\" GEM_PATH=\"$stage\""));
    assert!(install[2].contains("stage=\"$HOME/gems\""));
    assert_eq!(
        install[3..],
        [
            "gem-install".to_string(),
            format!("{workdir}/.sandlot/gems"),
            "colorize:1.1.0".to_string()
        ]
    );
    assert!(plan.commands[0].needs_network);
    assert_eq!(argvs(&plan)[1], "ruby main.rb first arg second");
    assert!(plan.commands[1]
        .env
        .contains(&("GEM_PATH".into(), format!("{workdir}/.sandlot/gems"))));
}

#[test]
fn bash_runs_the_script_with_its_arguments() {
    let dir = tempfile::tempdir().unwrap();
    let code = "set -eu\nfor a in \"$@\"; do echo \"[$a]\"; done\necho $(( 6 * 7 ))\n";
    let plan = plan("sh", code, &[], dir.path());
    assert_eq!(argvs(&plan), ["bash main.sh first arg second"]);
    if !needs(&[Need::Program("bash")]) {
        return;
    }
    assert_eq!(execute(&plan, dir.path()), "[first arg]\n[second]\n42\n");
}

#[test]
fn analysis_flags_dangerous_code_by_line_and_severity() {
    let cases: &[(&str, &str, &str, Severity, u32)] = &[
        (
            "python",
            "import os\n\nos.system('rm -rf /')\n",
            "python.os-command",
            Severity::High,
            3,
        ),
        (
            "javascript",
            "const cp = require('child_process');\n",
            "javascript.child-process",
            Severity::High,
            1,
        ),
        (
            "java",
            "class A {\n  void f() throws Exception { new ProcessBuilder(\"ls\").start(); }\n}\n",
            "java.process",
            Severity::High,
            2,
        ),
        (
            "cpp",
            "#include <cstdlib>\nint main() { system(\"ls\"); }\n",
            "cpp.process",
            Severity::High,
            2,
        ),
        (
            "go",
            "package main\nimport \"os/exec\"\n",
            "go.process",
            Severity::High,
            2,
        ),
        ("r", "system(\"ls\")\n", "r.process", Severity::High, 1),
        ("ruby", "x = `ls`\n", "ruby.process", Severity::High, 1),
        (
            "bash",
            "echo hi\n:(){ :|:& };:\n",
            "bash.fork-bomb",
            Severity::Critical,
            2,
        ),
    ];
    for &(language, code, rule, severity, line) in cases {
        let findings = host()
            .language(language)
            .unwrap()
            .analyze(code, &[])
            .unwrap();
        let finding = findings
            .iter()
            .find(|f| f.rule_id == rule)
            .unwrap_or_else(|| panic!("{language}: no {rule} in {findings:?}"));
        assert_eq!(
            (finding.severity, finding.line),
            (severity, Some(line)),
            "{language}"
        );
        assert_eq!(
            findings[0].severity,
            findings.iter().map(|f| f.severity).max().unwrap()
        );
    }
}

#[test]
fn analysis_is_quiet_on_ordinary_code_and_comments() {
    let cases = [
        (
            "python",
            "# os.system('x') is only mentioned here\nimport math\nprint(math.sqrt(2))\n",
        ),
        (
            "javascript",
            "// child_process\nconsole.log([1,2].map(x => x * 2));\n",
        ),
        (
            "python",
            "def my_eval(x):\n    return x\nprint(my_eval(1))\n",
        ),
    ];
    for (language, code) in cases {
        let findings = host()
            .language(language)
            .unwrap()
            .analyze(code, &[])
            .unwrap();
        assert!(findings.is_empty(), "{language}: {findings:?}");
    }
}

/// The rule ids `analyze` reports for `code`, with their lines, checking on the way
/// that the result is duplicate-free and the same on a second call.
fn flagged(language: &str, code: &str) -> Vec<(String, u32)> {
    let handler = host().language(language).unwrap();
    let findings = handler.analyze(code, &[]).unwrap();
    assert_eq!(
        findings,
        handler.analyze(code, &[]).unwrap(),
        "{language}: unstable"
    );
    let mut seen: Vec<(String, u32)> = findings
        .iter()
        .map(|f| (f.rule_id.clone(), f.line.unwrap_or(0)))
        .collect();
    let all = seen.len();
    seen.sort();
    seen.dedup();
    assert_eq!(seen.len(), all, "{language}: duplicates in {findings:?}");
    seen
}

#[test]
fn the_python_gate_follows_aliases_imports_and_built_names() {
    let cases: &[(&str, &str, u32)] = &[
        ("import os as o; o.system('id')\n", "python.os-command", 1),
        (
            "from os import system as s\ns('id')\n",
            "python.os-command",
            2,
        ),
        (
            "getattr(__builtins__, 'ev'+'al')('1+1')\n",
            "python.dynamic-code",
            1,
        ),
        (
            "import builtins\nf = getattr(builtins, 'ex' 'ec')\n",
            "python.dynamic-code",
            2,
        ),
        ("__import__('os').system('id')\n", "python.os-command", 1),
        (
            "m = __import__('o' + 's')\nm.popen('id')\n",
            "python.os-command",
            2,
        ),
        (
            "import importlib\nimportlib.import_module('subprocess').run(['id'])\n",
            "python.subprocess",
            2,
        ),
        ("run = os.system\n\nrun('id')\n", "python.os-command", 3),
        ("x = f\"{os.popen('id').read()}\"\n", "python.os-command", 1),
        (
            "print('#'); import os; os.execv('/bin/sh', ['sh'])\n",
            "python.os-command",
            1,
        ),
        (
            "import os\ngetattr(os, name)('id')\n",
            "python.dynamic-attribute",
            2,
        ),
        ("mod = __import__(input())\n", "python.dynamic-import", 1),
        ("from subprocess import *\n", "python.subprocess", 1),
        ("import ctypes.util\n", "python.native-code", 1),
        ("if True: import socket\n", "python.network", 1),
        ("open('/etc/passwd').read()\n", "python.system-files", 1),
        // A star import binds every name of the module.
        ("from os import *\nsystem('id')\n", "python.os-command", 2),
        (
            "from os import *\nexecv('/bin/sh', ['sh'])\n",
            "python.os-command",
            2,
        ),
        // Python reads identifiers in NFKC: fullwidth and mathematical letters are ASCII.
        (
            "import \u{ff4f}s\n\u{ff4f}s.system('id')\n",
            "python.os-command",
            2,
        ),
        (
            "import os\nos.\u{1d42c}\u{1d432}\u{1d42c}tem('id')\n",
            "python.os-command",
            2,
        ),
        // A shell through subprocess is a shell command.
        (
            "import subprocess\nsubprocess.run(['sh', '-c', 'id'])\n",
            "python.subprocess-shell",
            2,
        ),
        (
            "import subprocess as sp\nsp.Popen('id; ls', shell=True)\n",
            "python.subprocess-shell",
            2,
        ),
        (
            "from subprocess import check_output\ncheck_output(['/bin/bash', '-lc', 'id'])\n",
            "python.subprocess-shell",
            2,
        ),
    ];
    for &(code, rule, line) in cases {
        let found = flagged("python", code);
        assert!(
            found.contains(&(rule.to_string(), line)),
            "{code:?}: expected {rule} on line {line}, got {found:?}"
        );
    }
}

#[test]
fn a_shell_through_subprocess_rates_as_high_as_os_system() {
    let severity = |code: &str, rule: &str| {
        host()
            .language("python")
            .unwrap()
            .analyze(code, &[])
            .unwrap()
            .into_iter()
            .find(|f| f.rule_id == rule)
            .map(|f| f.severity)
    };
    assert_eq!(
        severity(
            "import subprocess\nsubprocess.run(['sh', '-c', 'id'])",
            "python.subprocess-shell"
        ),
        severity("import os\nos.system('id')", "python.os-command"),
    );
    // A program that is no shell, or shell=False, is only a subprocess.
    for code in [
        "import subprocess\nsubprocess.run(['ls', '-l'])\n",
        "import subprocess\nsubprocess.run('ls', shell=False)\n",
    ] {
        let found = flagged("python", code);
        assert!(
            found
                .iter()
                .all(|(rule, _)| rule != "python.subprocess-shell"),
            "{code:?}: {found:?}"
        );
        assert!(
            found.iter().any(|(rule, _)| rule == "python.subprocess"),
            "{code:?}: {found:?}"
        );
    }
}

#[test]
fn star_imports_and_nfkc_names_reach_restricted_calls_too() {
    let restricted = ["call:os.system", "module:socket"];
    for (code, rule, line) in [
        (
            "from os import *\nsystem('id')\n",
            "python.restricted-call.os.system",
            2,
        ),
        (
            "import \u{ff53}ocket\n",
            "python.restricted-module.socket",
            1,
        ),
    ] {
        let found = restricted_lines("python", code, &restricted);
        assert!(
            found.contains(&(rule.to_string(), line)),
            "{code:?}: {found:?}"
        );
    }
}

#[test]
fn a_javascript_require_of_a_computed_name_is_a_finding() {
    for (code, line) in [
        ("const m = require(name)\n", 1),
        ("const cp = require('child_' + 'process')\n", 1),
        ("\nconst m = await import(`./${x}.js`)\n", 2),
        ("module.require(process.argv[2])\n", 1),
    ] {
        for language in ["javascript", "typescript"] {
            let found = flagged(language, code);
            assert!(
                found.contains(&("javascript.dynamic-import".to_string(), line)),
                "{language} {code:?}: {found:?}"
            );
        }
    }
    for code in [
        "const fs = require('fs')\n",
        "const m = await import('./m.js')\nimport x from 'y'\n",
        "const t = require(`path`)\n",
        "// require(name)\nconst s = 'require(x)'\n",
        "const requireX = 1; myrequire(name)\n",
    ] {
        let found = flagged("javascript", code);
        assert!(
            found
                .iter()
                .all(|(rule, _)| rule != "javascript.dynamic-import"),
            "{code:?}: {found:?}"
        );
    }
}

#[test]
fn the_python_gate_ignores_text_that_only_mentions_dangerous_calls() {
    let quiet = [
        "# os.system('id')\nprint(1)\n",
        "print('os.system(1)')\n",
        "doc = \"\"\"\nimport subprocess\nos.system('x')\n\"\"\"\nprint(doc)\n",
        "x = f'{{os.system}} is only text {1 + 1}'\n",
        "import re\nre.compile('a+').match('aa')\n",
        "def send(socket):\n    return socket.send(b'x')\n",
        "class Shell:\n    def system(self, c):\n        return c\nShell().system('id')\n",
        "def f(exec=None):\n    return exec\n",
        "result = obj.eval(1)\nparams = dict(system='linux')\n",
    ];
    for code in quiet {
        assert_eq!(flagged("python", code), [], "{code:?}");
    }
}

#[test]
fn every_gate_reads_code_and_not_comments_strings_or_heredoc_text() {
    let flags: &[(&str, &str, &str, u32)] = &[
        (
            "javascript",
            "const t = `${require('node:child_process').execSync('id')}`;\n",
            "javascript.child-process",
            1,
        ),
        (
            "typescript",
            "import * as net from 'net';\n",
            "javascript.network",
            1,
        ),
        (
            "go",
            "package main\n\nimport (\n\t\"fmt\"\n\t\"os/exec\"\n)\n",
            "go.process",
            5,
        ),
        ("ruby", "require 'socket'\n", "ruby.network", 1),
        (
            "bash",
            "bash <<EOF\ncurl http://x\nEOF\n",
            "bash.network",
            2,
        ),
        (
            "bash",
            "echo \"$(curl http://x)\" # fetch\n",
            "bash.network",
            1,
        ),
    ];
    for &(language, code, rule, line) in flags {
        let found = flagged(language, code);
        assert!(
            found.contains(&(rule.to_string(), line)),
            "{language} {code:?}: expected {rule} on line {line}, got {found:?}"
        );
    }
    let quiet: &[(&str, &str)] = &[
        (
            "javascript",
            "/* require('child_process') */\nconsole.log('eval(x)');\n",
        ),
        ("javascript", "const s = `child_process ${1 + 1}`;\n"),
        (
            "go",
            "package main\n\nimport \"fmt\"\n\nfunc main() { fmt.Println(\"os/exec\", `net`) }\n",
        ),
        (
            "java",
            "class A { String s = \"ProcessBuilder\"; /* Runtime.getRuntime().exec */ }\n",
        ),
        ("cpp", "// system(\"ls\")\nconst char *s = \"popen(\";\n"),
        ("ruby", "puts \"system('ls')\" # exec(x)\n"),
        ("r", "cat('system(\"ls\")') # download.file(u)\n"),
        (
            "bash",
            "cat <<'EOF'\ncurl http://x | sh\nrm -rf /\nEOF\necho $# ${#x}\n",
        ),
        ("bash", "echo done # then curl http://x\n"),
    ];
    for &(language, code) in quiet {
        assert_eq!(flagged(language, code), [], "{language} {code:?}");
    }
}

/// `kind:name` restrictions at `high`, parsed as a policy file would give them.
fn restrictions(list: &[&str]) -> Vec<Restriction> {
    list.iter()
        .map(|entry| {
            let (kind, name) = entry.split_once(':').unwrap();
            Restriction {
                kind: match kind {
                    "module" => RestrictionKind::Module,
                    _ => RestrictionKind::Call,
                },
                name: name.parse().unwrap(),
                severity: Severity::High,
            }
        })
        .collect()
}

/// The lines on which `restricted` gives findings for `code`, with their rule ids.
fn restricted_lines(language: &str, code: &str, restricted: &[&str]) -> Vec<(String, u32)> {
    let handler = host().language(language).unwrap();
    let restricted = restrictions(restricted);
    let findings = handler.analyze(code, &restricted).unwrap();
    assert_eq!(findings, handler.analyze(code, &restricted).unwrap());
    let mut lines: Vec<(String, u32)> = findings
        .iter()
        .filter(|f| f.rule_id.contains(".restricted-"))
        .map(|f| {
            assert_eq!(f.severity, Severity::High, "{f:?}");
            assert!(f.message.contains("which the policy restricts"), "{f:?}");
            (f.rule_id.clone(), f.line.unwrap())
        })
        .collect();
    lines.sort_by(|a, b| (a.1, &a.0).cmp(&(b.1, &b.0)));
    lines
}

/// Language, code, restrictions, and the (rule id, line) findings they must give, in
/// line order.
type RestrictedCase<'a> = (&'a str, &'a str, &'a [&'a str], Vec<(String, u32)>);

/// A restricted finding's rule id and line, as [`restricted_lines`] gives them.
fn rule(id: &str, line: u32) -> (String, u32) {
    (id.to_string(), line)
}

fn assert_restricted(cases: &[RestrictedCase]) {
    for (language, code, restricted, expected) in cases {
        assert_eq!(
            &restricted_lines(language, code, restricted),
            expected,
            "{language}: {code}"
        );
    }
}

#[test]
fn restricted_modules_and_calls_are_found_under_every_name_code_binds_them_to() {
    assert_restricted(&[
        (
            "python",
            "import socket as s\nfrom os import getcwd as g\nh = __import__('socket')\n\
             x = 1  # import socket\ny = 'os.getcwd()'\ng()\nimport requests.adapters\n",
            &["module:socket", "call:os.getcwd", "module:requests"],
            vec![
                rule("python.restricted-module.socket", 1),
                rule("python.restricted-call.os.getcwd", 2),
                rule("python.restricted-module.socket", 3),
                rule("python.restricted-call.os.getcwd", 6),
                rule("python.restricted-module.requests", 7),
            ],
        ),
        (
            "javascript",
            "const cp = require('child_process');\ncp.exec('id');\n\
             const { exec: run } = require('node:child_process');\nrun('id');\n\
             // cp.exec('x')\nconsole.log('child_process.exec');\n",
            &["call:child_process.exec"],
            // Taking the function out of the module is reaching it, as in Python.
            vec![
                rule("javascript.restricted-call.child_process.exec", 2),
                rule("javascript.restricted-call.child_process.exec", 3),
                rule("javascript.restricted-call.child_process.exec", 4),
            ],
        ),
        (
            "typescript",
            "import { exec as run } from 'child_process';\nimport * as net from 'net';\n\
             run('id');\nconst x: string = 'run(1)';\n",
            &["call:child_process.exec", "module:net"],
            vec![
                rule("typescript.restricted-call.child_process.exec", 1),
                rule("typescript.restricted-module.net", 2),
                rule("typescript.restricted-call.child_process.exec", 3),
            ],
        ),
        (
            "go",
            "package main\n\nimport (\n\tx \"os/exec\"\n\t\"net/http\"\n)\n\n\
             func main() { x.Command(\"id\").Run(); http.Get(\"u\") }\n",
            &["call:os/exec.Command", "module:net"],
            vec![
                rule("go.restricted-module.net", 5),
                rule("go.restricted-call.os/exec.Command", 8),
            ],
        ),
        (
            "java",
            "import java.net.Socket;\nimport java.nio.file.Files;\n\
             class Main { void f() throws Exception { Files.delete(null); } }\n\
             // Files.delete(x)\n",
            &["module:java.net", "call:java.nio.file.Files.delete"],
            vec![
                rule("java.restricted-module.java.net", 1),
                rule("java.restricted-call.java.nio.file.Files.delete", 3),
            ],
        ),
        (
            "cpp",
            "#include <sys/socket.h>\n#include \"local.h\"\nint main() { system(\"id\"); }\n\
             // system(x)\n",
            &["module:sys/socket.h", "module:local.h", "call:system"],
            vec![
                rule("cpp.restricted-module.sys/socket.h", 1),
                rule("cpp.restricted-module.local.h", 2),
                rule("cpp.restricted-call.system", 3),
            ],
        ),
        (
            "r",
            "library(httr)\nx <- jsonlite::fromJSON('[]')\nsystem2('id')\n# system2('x')\n",
            &["module:httr", "module:jsonlite", "call:system2"],
            vec![
                rule("r.restricted-module.httr", 1),
                rule("r.restricted-module.jsonlite", 2),
                rule("r.restricted-call.system2", 3),
            ],
        ),
        (
            "ruby",
            "require 'net/http'\nsystem('id')\nputs 'system(1)' # system\nsystems = 1\n",
            &["module:net", "call:system"],
            vec![
                rule("ruby.restricted-module.net", 1),
                rule("ruby.restricted-call.system", 2),
            ],
        ),
        (
            "bash",
            "curl -s http://x\ncurl-config --libs\n# curl\ncat <<'EOF'\ncurl\nEOF\n",
            &["call:curl"],
            vec![rule("bash.restricted-call.curl", 1)],
        ),
    ]);
}

/// The forms a reviewer found slipping past the first version of the restriction
/// matching, one language at a time.
#[test]
fn restrictions_follow_multi_line_chained_dotted_and_wildcard_imports() {
    assert_restricted(&[
        (
            "javascript",
            "const d = 'child_process';\nconst fs = require('fs'), cp = require('child_process');\n\
             cp.exec('id');\nrequire('child_process').exec('id');\n\
             const { execSync } = module.require('child_process');\nexecSync('id');\n",
            &["call:child_process.exec*"],
            vec![
                rule("javascript.restricted-call.child_process.exec*", 3),
                rule("javascript.restricted-call.child_process.exec*", 4),
                rule("javascript.restricted-call.child_process.exec*", 5),
                rule("javascript.restricted-call.child_process.exec*", 6),
            ],
        ),
        (
            "typescript",
            "import cp, {\n  spawn as go,\n} from 'child_process';\nlet n = 1\ngo('id');\ncp.spawn('x');\n",
            &["call:child_process.spawn"],
            vec![
                rule("typescript.restricted-call.child_process.spawn", 2),
                rule("typescript.restricted-call.child_process.spawn", 5),
                rule("typescript.restricted-call.child_process.spawn", 6),
            ],
        ),
        (
            "go",
            "package main\n\nimport . \"os\"\nimport \"github.com/go-git/go-git/v5\"\n\n\
             func main() { RemoveAll(\"/\"); git.PlainClone(\"d\", false, nil) }\n",
            &["call:os.RemoveAll", "call:github.com/go-git/go-git/v5.PlainClone"],
            vec![
                rule("go.restricted-call.github.com/go-git/go-git/v5.PlainClone", 6),
                rule("go.restricted-call.os.RemoveAll", 6),
            ],
        ),
        (
            "java",
            "import\tjava.util.*; import java.net.*;\n\
             class Main { void f() throws Exception { new Socket(\"h\", 1); System.exit(1); } }\n",
            &["module:java.net", "call:java.net.Socket", "call:java.lang.System.exit"],
            vec![
                rule("java.restricted-module.java.net", 1),
                rule("java.restricted-call.java.lang.System.exit", 2),
                rule("java.restricted-call.java.net.Socket", 2),
            ],
        ),
        (
            "r",
            "base:::system('id')\n",
            &["call:base::system"],
            vec![rule("r.restricted-call.base::system", 1)],
        ),
        (
            "bash",
            "echo hi; source ./lib.sh\n. \"/etc/profile\"\n",
            &["module:./lib.sh", "module:/etc/profile"],
            vec![
                rule("bash.restricted-module../lib.sh", 1),
                rule("bash.restricted-module./etc/profile", 2),
            ],
        ),
        (
            "python",
            "import socket\nimport socketserver\n",
            &["module:socket*"],
            vec![
                rule("python.restricted-module.socket*", 1),
                rule("python.restricted-module.socket*", 2),
            ],
        ),
    ]);
}

#[test]
fn without_restrictions_a_name_gives_no_restricted_finding_and_a_wildcard_matches_a_family() {
    assert_eq!(restricted_lines("python", "import socket\n", &[]), []);
    assert_eq!(
        restricted_lines(
            "python",
            "import os\nos.execvp('id', [])\nos.exe = 1\n",
            &["call:os.exec*"]
        ),
        [("python.restricted-call.os.exec*".to_string(), 2)]
    );
}

#[test]
fn every_built_in_language_runs_in_an_image_a_recipe_builds() {
    let recipes = sandlot::docker::Recipe::all();
    for handler in host().languages() {
        let info = handler.info();
        assert!(
            recipes.iter().any(|r| r.image == info.default_image),
            "{} defaults to {}, which no recipe in images/ builds",
            info.id,
            info.default_image
        );
    }
}

/// A table of `rows` rows of `{"id", "name", "score"}`, as a model inlines data.
fn inlined_table(rows: usize) -> String {
    (1..=rows)
        .map(|i| format!("    {{\"id\": {i}, \"name\": \"user{i}\", \"score\": 1.5}},\n"))
        .collect()
}

/// A finding after `table`, in Python and JavaScript.
fn after_a_table(table: &str) -> [(&'static str, String, &'static str); 2] {
    [
        (
            "python",
            format!("rows = [\n{table}]\nimport os\nos.system('id')\n"),
            "python.os-command",
        ),
        (
            "javascript",
            format!("const rows = [\n{table}];\nrequire('child_process').execSync('id');\n"),
            "javascript.child-process",
        ),
    ]
}

/// Each `(language, code, rule)` is analysed, and `rule` is found on the code's last
/// line.
fn finds_on_the_last_line(cases: &[(&str, String, &str)]) {
    for (language, code, rule) in cases {
        let findings = host()
            .language(language)
            .unwrap()
            .analyze(code, &[])
            .unwrap_or_else(|e| panic!("{language}, {} bytes: {e}", code.len()));
        let finding = findings
            .iter()
            .find(|f| f.rule_id == *rule)
            .unwrap_or_else(|| panic!("{language}: no {rule} in {findings:?}"));
        let last_line = code.lines().count() as u32;
        assert_eq!(finding.line, Some(last_line), "{language}");
    }
}

/// Data inlined as literals — the usual way a model hands a table to its code — is
/// analysed like any code of its size: 20,000 rows (about 1 MB, 40,000 string
/// literals) pass the handlers' default deadline, and a finding after them still
/// names its line.
#[test]
fn thousands_of_string_literals_are_analysed_within_the_handlers_limits() {
    finds_on_the_last_line(&after_a_table(&inlined_table(20_000)));
}

/// A handler's limits grow with the code it is handed: 2 MB of one-line assignments
/// (more tokens than the fixed 64 MiB holds) and 8 MB of an inlined table in Python,
/// JavaScript and Bash are analysed, and a finding at the end names its line, where
/// the fixed 1 s and 64 MiB refused them.
#[test]
fn megabytes_of_code_are_analysed_with_limits_that_grow_with_it() {
    let assignments = "x=1\n".repeat(500_000);
    let table = inlined_table(160_000);
    let mut cases = after_a_table(&table).to_vec();
    cases.push((
        "python",
        format!("{assignments}import os\nos.system('id')\n"),
        "python.os-command",
    ));
    cases.push((
        "bash",
        format!("rows='\n{table}'\nrm -rf /\n"),
        "bash.destructive",
    ));
    finds_on_the_last_line(&cases);
}
