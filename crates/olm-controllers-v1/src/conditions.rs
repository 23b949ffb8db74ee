//! Conditions as `meta.SetStatusCondition` keeps them: one per type, the transition time kept
//! while the status stays the same.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;

/// A condition's status.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    True,
    False,
    Unknown,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::True => "True",
            Status::False => "False",
            Status::Unknown => "Unknown",
        }
    }
}

impl From<bool> for Status {
    fn from(value: bool) -> Status {
        if value { Status::True } else { Status::False }
    }
}

/// One condition to set.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Set<'a> {
    pub type_: &'a str,
    pub status: Status,
    pub reason: &'a str,
    pub message: String,
}

/// `conditions` with `set` in place of the condition of its type: its transition time is the
/// previous one when the status did not change, else `now`.
pub fn set(conditions: &mut Vec<Condition>, previous: &[Condition], set: Set<'_>, generation: Option<i64>, now: Timestamp) {
    let status = set.status.as_str();
    let transition = previous
        .iter()
        .find(|c| c.type_ == set.type_ && c.status == status)
        .map_or(Time(now), |c| c.last_transition_time.clone());
    let condition = Condition {
        type_: set.type_.to_owned(),
        status: status.to_owned(),
        reason: set.reason.to_owned(),
        message: set.message,
        last_transition_time: transition,
        observed_generation: generation,
    };
    match conditions.iter_mut().find(|c| c.type_ == condition.type_) {
        Some(existing) => *existing = condition,
        None => conditions.push(condition),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seconds: i64) -> Timestamp {
        Timestamp::from_second(seconds).unwrap()
    }

    #[test]
    fn the_transition_time_moves_only_with_the_status() {
        let mut conditions = Vec::new();
        set(&mut conditions, &[], Set { type_: "Serving", status: Status::True, reason: "Available", message: "a".into() }, Some(1), at(10));
        let previous = conditions.clone();
        let mut next = Vec::new();
        set(&mut next, &previous, Set { type_: "Serving", status: Status::True, reason: "Available", message: "b".into() }, Some(2), at(20));
        assert_eq!(next[0].last_transition_time, Time(at(10)), "same status: the old time");
        assert_eq!((next[0].message.as_str(), next[0].observed_generation), ("b", Some(2)));
        let mut flipped = Vec::new();
        set(&mut flipped, &next, Set { type_: "Serving", status: Status::False, reason: "Unavailable", message: String::new() }, Some(2), at(30));
        assert_eq!(flipped[0].last_transition_time, Time(at(30)), "a new status: now");
        set(&mut flipped, &next, Set { type_: "Serving", status: Status::True, reason: "Available", message: String::new() }, Some(2), at(40));
        assert_eq!(flipped.len(), 1, "one condition per type");
    }
}
