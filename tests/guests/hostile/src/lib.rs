//! Kind `hostile`: one step per way a guest can abuse its sandbox, for the host's
//! limit and isolation tests.
//!
//! Steps that exhaust a resource never return; the host's test sees the trap. Steps
//! that probe for ambient authority (`read-file`, `write-file`, `socket`, `env`)
//! complete with `{"denied": true, "error": "..."}` when every probe failed and are
//! refused with code `escaped` when any succeeded. `ok` completes `{}`, to show the
//! host still serves after the others.

use std::hint::black_box;
use std::io::Write;

use serde_json::json;
use spindle_guest::prelude::*;

struct Hostile;

const STEPS: [&str; 13] = [
    "spin",
    "alloc",
    "recurse",
    "recurse-native",
    "panic",
    "huge-output",
    "stdout-flood",
    "read-file",
    "write-file",
    "socket",
    "env",
    "forge-log",
    "ok",
];

impl Kind for Hostile {
    fn describe() -> KindSpec {
        STEPS.iter().fold(KindSpec::new("hostile"), |spec, key| spec.step(*key, 1)).retry(1, 0, 0)
    }

    fn run_step(step: &mut Step) -> Result<Outcome, StepError> {
        match step.key() {
            "spin" => spin(),
            "alloc" => alloc(),
            "recurse" => Ok(Outcome::complete(&json!({ "depth": dive(0) }))),
            "recurse-native" => Ok(Outcome::complete(&json!({ "depth": descend(0) }))),
            "panic" => panic!("hostile guest panics on purpose"),
            "huge-output" => Ok(huge_output()),
            "stdout-flood" => Ok(stdout_flood()),
            "read-file" => probe(&[
                ("read /etc/passwd", std::fs::read("/etc/passwd").map(drop)),
                ("read_dir /", std::fs::read_dir("/").map(drop)),
                ("read_dir .", std::fs::read_dir(".").map(drop)),
            ]),
            "write-file" => probe(&[
                ("write /tmp/x", std::fs::write("/tmp/x", b"escaped")),
                ("write ./x", std::fs::write("x", b"escaped")),
            ]),
            "socket" => probe(&[
                ("connect 127.0.0.1:80", std::net::TcpStream::connect("127.0.0.1:80").map(drop)),
                ("connect 1.1.1.1:443", std::net::TcpStream::connect("1.1.1.1:443").map(drop)),
                ("bind udp 0.0.0.0:0", std::net::UdpSocket::bind("0.0.0.0:0").map(drop)),
            ]),
            "env" => env(),
            "forge-log" => forge_log(),
            "ok" => Ok(Outcome::complete_bytes(*b"{}")),
            other => Err(StepError::unknown_step(other)),
        }
    }
}

/// A forged host log line, as a guest would try to slip it into the host's log.
const FORGED: &str = "innocent\n2099-01-01T00:00:00.000000Z  INFO spindle: forged by a guest";

/// Tries to forge host log lines through every channel a guest's text reaches the host
/// by: a log line, stdout, and a 20 MB retryable message full of line breaks.
fn forge_log() -> Result<Outcome, StepError> {
    log::info(FORGED);
    println!("{FORGED}");
    let flood = FORGED.repeat((20 << 20) / FORGED.len());
    Err(StepError::retryable("forge\nINFO spindle: forged", flood))
}

/// Burns CPU forever; only the host's deadline (epoch or fuel) ends it.
fn spin() -> ! {
    let mut turns = 0_u64;
    loop {
        turns = black_box(turns.wrapping_add(1));
    }
}

/// Hoards memory 1 MiB at a time, touching every page so none stays virtual, until
/// the allocator fails (the guest aborts) or the host refuses to grow memory.
fn alloc() -> ! {
    let mut hoard: Vec<Vec<u8>> = Vec::new();
    loop {
        let mut chunk = vec![0_u8; 1 << 20];
        for byte in chunk.iter_mut().step_by(4096) {
            *byte = 1;
        }
        hoard.push(black_box(chunk));
    }
}

/// Recurses with a tiny frame, so the wasm stack itself (not the shadow stack Rust
/// keeps in linear memory) runs out first.
fn descend(depth: u64) -> u64 {
    if depth == u64::MAX {
        return 0;
    }
    // black_box keeps LLVM from turning the recursion into a loop.
    black_box(descend(black_box(depth + 1))).wrapping_add(depth)
}

/// Recurses with a 512-byte frame until the stack runs out. Rust keeps such frames on a
/// shadow stack at the bottom of linear memory, so this overflows that first: an
/// out-of-bounds access below address 0. The exit on `u64::MAX`
/// is unreachable in practice but keeps the recursion conditional for the compiler.
fn dive(depth: u64) -> u64 {
    let frame = black_box([depth; 64]);
    if black_box(depth) == u64::MAX {
        return 0;
    }
    let below = dive(depth + 1);
    black_box(below.wrapping_add(frame[(depth % 64) as usize]))
}

/// A 64 MiB output (a JSON string), to test the host's cap on what a guest hands back.
fn huge_output() -> Outcome {
    const SIZE: usize = 64 << 20;
    let mut output = vec![b'x'; SIZE];
    output[0] = b'"';
    output[SIZE - 1] = b'"';
    Outcome::complete_bytes(output)
}

/// Writes about 10 MiB to each of stdout and stderr, stopping at the first write the
/// host refuses, then reports how much got through.
fn stdout_flood() -> Outcome {
    const TOTAL: usize = 10 << 20;
    let line = [b'#'; 1023].iter().chain(b"\n").copied().collect::<Vec<u8>>();
    let flood = |out: &mut dyn Write| {
        let mut written = 0;
        while written < TOTAL {
            if out.write_all(&line).is_err() {
                break;
            }
            written += line.len();
        }
        let _ = out.flush();
        written
    };
    let stdout = flood(&mut std::io::stdout().lock());
    let stderr = flood(&mut std::io::stderr().lock());
    Outcome::complete(&json!({ "stdout_bytes": stdout, "stderr_bytes": stderr }))
}

/// Reports a set of attempts at ambient authority: denied if all failed, `escaped`
/// if any worked.
fn probe(attempts: &[(&str, std::io::Result<()>)]) -> Result<Outcome, StepError> {
    let escaped: Vec<&str> = attempts.iter().filter(|(_, result)| result.is_ok()).map(|(what, _)| *what).collect();
    if !escaped.is_empty() {
        return Err(StepError::refused("escaped", format!("the sandbox allowed: {}", escaped.join(", "))));
    }
    let errors: Vec<String> =
        attempts.iter().filter_map(|(what, result)| result.as_ref().err().map(|e| format!("{what}: {e}"))).collect();
    Ok(Outcome::complete(&json!({ "denied": true, "error": errors.join("; ") })))
}

/// Counts the environment variables and arguments the guest can see; values are
/// never reported, since a leaked variable may hold a secret.
fn env() -> Result<Outcome, StepError> {
    let vars = std::env::vars_os().count();
    let args = std::env::args_os().count();
    if vars > 0 || args > 0 {
        let names: Vec<String> = std::env::vars_os().map(|(name, _)| name.to_string_lossy().into_owned()).collect();
        return Err(StepError::refused("escaped", format!("the sandbox shows {vars} variables and {args} arguments"))
            .with_detail(format!("variable names: {}", names.join(", "))));
    }
    Ok(Outcome::complete(&json!({
        "denied": true,
        "error": "no variables and no arguments visible",
        "vars": vars,
        "args": args,
    })))
}

spindle_guest::export_kind!(Hostile);
