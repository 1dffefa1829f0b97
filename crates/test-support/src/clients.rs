//! Command-line clients the tests drive as processes (kcat, kafka-python and pika scripts,
//! amqp-tools): run one with its input within a bound, and fail the test with the client's
//! own error output when it is missing, hangs or fails.

use std::process::{Output, Stdio};
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::process::Command;

/// Longest a client process may run.
pub const CLIENT_TIMEOUT: Duration = Duration::from_secs(90);

/// Runs `program args` with `stdin`, failing the test if it is missing (with the fix), runs
/// past [`CLIENT_TIMEOUT`] (it is killed), or exits unsuccessfully. The program inherits
/// the tests' `LD_LIBRARY_PATH`, where cargo puts the build's own libraries: kcat run so
/// loads rdkafka-sys's librdkafka 2.12, not the system's (see [`run_as_installed`]).
pub async fn run(program: &str, args: &[&str], stdin: &[u8]) -> Output {
    run_command(Command::new(program), program, args, stdin).await
}

/// [`run`], with the system's shared libraries only, as a user runs `program`: Debian's
/// kcat with its own librdkafka (2.0.2).
pub async fn run_as_installed(program: &str, args: &[&str], stdin: &[u8]) -> Output {
    let mut command = Command::new(program);
    command.env_remove("LD_LIBRARY_PATH");
    run_command(command, program, args, stdin).await
}

/// Runs `command` (of `program`) as [`run`] describes.
async fn run_command(mut command: Command, program: &str, args: &[&str], stdin: &[u8]) -> Output {
    let mut child = command
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {program} ({e}); install it with scripts/setup.sh"));
    let mut input = child.stdin.take().unwrap();
    input.write_all(stdin).await.unwrap();
    drop(input);
    let output = tokio::time::timeout(CLIENT_TIMEOUT, child.wait_with_output())
        .await
        .unwrap_or_else(|_| panic!("{program} {args:?} ran past {CLIENT_TIMEOUT:?}"))
        .unwrap();
    assert!(
        output.status.success(),
        "{program} {args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

/// Runs the step script `tests/python/SCRIPT BOOTSTRAP MECHANISM USER PASSWORD`, logged
/// in as `login` (user, password, mechanism), with `steps` on its input; its output lines.
pub async fn python_steps(
    script: &str,
    bootstrap: &str,
    login: (&str, &str, &str),
    steps: &str,
) -> Vec<String> {
    let (user, password, mechanism) = login;
    let args = [&python_script(script), bootstrap, mechanism, user, password];
    let out = run("python3", &args, steps.as_bytes()).await;
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// The path of `tests/python/NAME`.
pub fn python_script(name: &str) -> String {
    crate::repository()
        .join("tests/python")
        .join(name)
        .to_string_lossy()
        .into_owned()
}

/// Produces `input` (`key:value` lines) to `topic` with kcat at `bootstrap`, then consumes
/// the topic from the beginning; what kcat printed, one `key value` line per record.
/// `settings` are kcat's `-X` options for both runs.
pub async fn kcat_through(bootstrap: &str, topic: &str, settings: &[&str], input: &[u8]) -> String {
    let produce = [&["-b", bootstrap, "-P", "-t", topic, "-K", ":"], settings].concat();
    run("kcat", &produce, input).await;
    kcat_consume(bootstrap, topic, "%k %s\\n", settings).await
}

/// What kcat consumes of `topic` at `bootstrap` from the beginning to its end, a record a
/// line printed with kcat's `format`; `options` are more of kcat's options.
pub async fn kcat_consume(bootstrap: &str, topic: &str, format: &str, options: &[&str]) -> String {
    let consume = [
        &[
            "-b",
            bootstrap,
            "-C",
            "-t",
            topic,
            "-o",
            "beginning",
            "-e",
            "-q",
            "-f",
            format,
        ],
        options,
    ]
    .concat();
    String::from_utf8(run("kcat", &consume, b"").await.stdout).unwrap()
}
