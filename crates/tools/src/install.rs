//! The one installation of a file's new bytes beneath the root (`write_file`, `edit_file`):
//! `confine-atomicwrite`'s steps with the tools' checks between them.

use std::ffi::OsStr;
use std::io;

use confine_atomicwrite::{Hooks, Step};
use confine_rootid::WorkspaceRoot;
use tokio_util::sync::CancellationToken;

use crate::error::{CallError, Cancelled, ErrorKind, failed};
use crate::parent::Parent;
use crate::protect::ProtectedPaths;

/// Install `bytes` as `name` in the held `parent` through [`confine_atomicwrite::install_with`], with
/// the checks of the module docs between its steps; `check` runs last before the commit
/// ([`Step::Rename`]) and after the parent's check once committed ([`Step::CheckInstalled`],
/// given the name where the displaced old file waits, if any): edit_file's conflict checks. A refusal by a check is reported as itself, an
/// installation error by the token `token` gives it. The caller holds the target's lock.
/// After the commit the parent's real place is judged against `protected` again: a parent
/// renamed into a protected place meanwhile undoes the commit (`PATH_PROTECTED`).
#[allow(clippy::too_many_arguments)]
pub(crate) fn install_checked(
    root: &WorkspaceRoot,
    protected: &ProtectedPaths,
    parent: &Parent,
    name: &str,
    bytes: &[u8],
    cancel: &CancellationToken,
    check: &CallerCheck<'_>,
    token: &dyn Fn(&confine_atomicwrite::Error) -> ErrorKind,
) -> Result<confine_atomicwrite::Installed, CallError> {
    let mut guard = Guard {
        root,
        protected,
        parent,
        name,
        cancel,
        caller: check,
        reason: None,
    };
    confine_atomicwrite::install_with(&parent.dir, name, bytes, &mut guard).map_err(|e| {
        match guard.reason.take() {
            Some(reason) => reason,
            // For the operator's log: the step and the system's error (never a path).
            None => failed(token(&e)).with_source(match e.io_error() {
                Some(io) => format!("{e}: {io}"),
                None => e.to_string(),
            }),
        }
    })
}

/// A caller's own check at a step of the installation, given the step's name (see
/// [`install_checked`]).
pub(crate) type CallerCheck<'a> = dyn Fn(Step, Option<&OsStr>) -> Result<(), CallError> + 'a;

/// The tool's checks between the installation's steps.
struct Guard<'a> {
    root: &'a WorkspaceRoot,
    protected: &'a ProtectedPaths,
    parent: &'a Parent,
    name: &'a str,
    cancel: &'a CancellationToken,
    caller: &'a CallerCheck<'a>,
    /// Why the guard stopped the installation, reported instead of `WRITE_FAILED`.
    reason: Option<CallError>,
}

impl Guard<'_> {
    fn check(&self, step: Step, temp: Option<&OsStr>) -> Result<(), CallError> {
        if !step.is_after_commit() && self.cancel.is_cancelled() {
            return Err(Cancelled.into());
        }
        match step {
            Step::Rename => {
                self.root.verify()?;
                self.parent.recheck(self.root)?;
                (self.caller)(step, temp)
            }
            Step::CheckInstalled => match self.parent.still_beneath(self.root)? {
                true => {
                    // Renamed into a protected place after the checks: undone, refused.
                    self.protected
                        .check_in(self.root, &self.parent.dir, self.name, false)?;
                    (self.caller)(step, temp)
                }
                // The directory was moved out of the workspace under us: the file must not
                // stay installed out there.
                false => Err(failed(ErrorKind::PathOutsideWorkspace)),
            },
            _ => Ok(()),
        }
    }
}

impl Hooks for Guard<'_> {
    fn before(&mut self, step: Step, temp: Option<&OsStr>) -> io::Result<()> {
        self.check(step, temp).map_err(|e| {
            self.reason = Some(e);
            io::Error::other("refused by the installation guard")
        })?;
        #[cfg(test)]
        gates::after_check(step, temp);
        Ok(())
    }
}

/// The tests' seam: an action between the guard's check at a step and the step itself.
#[cfg(test)]
pub(crate) mod gates {
    use std::sync::Mutex;

    use super::*;

    /// A test's action between the guard's check at a step and the step itself, for the
    /// write whose temporary's name holds `name` (run once).
    struct Gate {
        name: &'static str,
        step: Step,
        action: Box<dyn FnOnce() + Send>,
    }

    static GATES: Mutex<Vec<Gate>> = Mutex::new(Vec::new());

    pub(crate) fn gate(name: &'static str, step: Step, action: impl FnOnce() + Send + 'static) {
        GATES.lock().unwrap().push(Gate {
            name,
            step,
            action: Box::new(action),
        });
    }

    pub(super) fn after_check(step: Step, temp: Option<&OsStr>) {
        let temp = temp.map(|t| t.to_string_lossy().into_owned());
        let gate = {
            let mut gates = GATES.lock().unwrap();
            let at = gates.iter().position(|g| {
                g.step == step && temp.as_deref().is_some_and(|t| t.contains(g.name))
            });
            at.map(|i| gates.remove(i))
        };
        if let Some(gate) = gate {
            (gate.action)();
        }
    }
}
