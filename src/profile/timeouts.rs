//! The timeouts part of a profile's validation, checked into [`Timeouts`].

use super::check::Check;
use super::{Profile, ProfileError};
use crate::model::plan::Timeouts;
use crate::model::units;

impl Profile {
    /// The timeouts, checked.
    pub(super) fn plan_timeouts(&self, cx: &Check<'_>) -> Result<Timeouts, ProfileError> {
        let command_timeout_us = self.command_timeout().us();
        let connect_timeout_us = self.connect_timeout().us();
        if command_timeout_us == 0 || connect_timeout_us == 0 {
            return Err(cx.err(
                "command_timeout",
                "timeouts must be longer than 0".to_string(),
            ));
        }
        let give_up_after_us = self.give_up_after().us();
        if give_up_after_us < 100_000 {
            return Err(cx.err(
                "give_up_after",
                format!(
                    "{} is too short to tell an outage from a hiccup: use at least 100ms",
                    units::fmt_us(give_up_after_us, units::Style::Compact)
                ),
            ));
        }
        Ok(Timeouts {
            command_timeout_us,
            connect_timeout_us,
            give_up_after_us,
        })
    }
}
