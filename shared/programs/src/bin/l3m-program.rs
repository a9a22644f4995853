//! `l3m-program`: evaluates one sealed program for its parent, under OS limits (see
//! `l3m_programs::child`).

fn main() -> std::process::ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    l3m_programs::child::main(&args)
}
