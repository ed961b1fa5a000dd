//! How a command ends: its [`Outcome`], and the one place that turns it into an exit status.

use std::process::ExitCode;

/// Why a command failed. Its type decides the exit status, in [`exit_status`] and nowhere
/// else: 2 when what the user gave is wrong, 1 when the work failed, 3 for a failed shard
/// job, 4 when the work succeeded but a verdict differs from its expectation.
#[derive(Debug)]
pub(crate) enum Failure {
    /// A pipeline file, a flag, a path or a name the user gave is wrong: exit 2.
    BadInput(String),
    /// The work failed (a stage, a comparison, a download, a write): exit 1.
    Failed(String),
    /// A Slurm shard job failed (`dplab slurm --wait`): exit 3, so a script can tell it
    /// from a failed merge.
    ShardFailed(String),
    /// Every pipeline ran, but a checking stage's verdict (an audit's) differs from what it
    /// expected (`expect:`; with none, any flag): exit 4, so a script or CI tells a broken
    /// mechanism from a broken run.
    Unexpected(String),
}

/// What a command returns; the message of a failure is printed by [`exit_status`] (empty when
/// the command printed its errors as it went, one per pipeline or file).
pub(crate) type Outcome = Result<(), Failure>;

/// The one place where an outcome becomes an exit status.
pub(crate) fn exit_status(outcome: Outcome) -> ExitCode {
    let (code, message) = match outcome {
        Ok(()) => return ExitCode::SUCCESS,
        Err(Failure::BadInput(m)) => (2, m),
        Err(Failure::Failed(m)) => (1, m),
        Err(Failure::ShardFailed(m)) => (3, m),
        Err(Failure::Unexpected(m)) => (4, m),
    };
    if !message.is_empty() {
        errln!("error: {message}");
    }
    ExitCode::from(code)
}
