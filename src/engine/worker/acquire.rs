//! The acquisitions other than lockbench's one `SET key token NX PX ttl`: the two-command
//! anti-pattern, and the user's own acquire script.

use super::{Worker, counted};
use crate::engine::pacer::Pacer;
use crate::model::error::CmdResult;
use crate::store::{LockConn, acquire_by_script};
use rand::RngExt;

impl<C: LockConn, P: Pacer> Worker<C, P> {
    /// The two-command acquisition: `SETNX`, then `PEXPIRE` — unless the holder dies in
    /// between (`crash_between`, decided as the section opens), which this sends nothing for.
    /// `Some(0)`: acquired (these locks are never fenced).
    pub(super) async fn setnx_expire(&mut self, lock: &str, token: &str) -> CmdResult<Option<u64>> {
        let ctx = self.ctx.clone();
        let set = self.conn.setnx(lock, token);
        if !counted(&ctx.recorder, &mut self.pacer, set).await? {
            return Ok(None);
        }
        if ctx.crash_between > 0.0 {
            // Peek the draw the section will use: the same stream, not consumed here.
            let mut peek = self.st.crashes.clone();
            if peek.random::<f64>() < ctx.crash_between {
                return Ok(Some(0));
            }
        }
        let expire = self.conn.pexpire(lock, ctx.ttl_ms);
        if let Err(e) = counted(&ctx.recorder, &mut self.pacer, expire).await {
            // Held without an expiry until released: the hazard the one-command SET avoids.
            ctx.recorder.error(&e);
        }
        Ok(Some(0))
    }

    /// The user's acquire script (`acquire_script`): `Some(0)` acquired (never fenced: a
    /// fenced variant takes lockbench's fenced script), `None` busy; a reply outside the
    /// convention is an error that names the script.
    pub(super) async fn acquire_by_script(
        &mut self,
        lock: &str,
        token: &str,
    ) -> CmdResult<Option<u64>> {
        let ctx = self.ctx.clone();
        let Some(script) = ctx.acquire_script() else {
            return Ok(None);
        };
        let set = acquire_by_script(&mut self.conn, script, lock, token, ctx.ttl_ms);
        let acquired = counted(&ctx.recorder, &mut self.pacer, set).await;
        if let Err(e) = &acquired {
            ctx.note_script_error(e);
        }
        Ok(acquired?.then_some(0))
    }
}
