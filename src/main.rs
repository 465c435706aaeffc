//! The `placer` binary (also `kubectl-placer`, see [`cli::KUBECTL_PLUGIN`]): parse the command
//! line and hand over to the library.

use std::process::ExitCode;

use placer::cli::{self, Command};

// The allocator is chosen by measurement (docs/benchmarks.md, "Allocator"): the
// system one by default; the two features exist to repeat that measurement
// (scripts/allocators.sh) and for deployments that want jemalloc's lower RSS.
#[cfg(all(feature = "mimalloc", feature = "tikv-jemallocator"))]
compile_error!("choose one allocator feature: mimalloc or tikv-jemallocator");

#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[cfg(feature = "tikv-jemallocator")]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> ExitCode {
    let cli = cli::parse();
    let result = match cli.command {
        Command::Serve(args) => tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .map_err(anyhow::Error::from)
            .and_then(|rt| rt.block_on(cli::serve(args))),
        Command::Explain(args) => cli::explain(args),
        Command::Score(args) => cli::score(&args),
        Command::Simulate(args) => cli::simulate(&args),
        Command::CheckPolicy { policy } => cli::check_policy(&policy),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {}", cli::error_message(&e));
            ExitCode::FAILURE
        }
    }
}
