//! `operators.coreos.com/v1`: OperatorGroup (storage version), Operator, OLMConfig,
//! OperatorCondition (served; v2 is stored).

pub mod olm_config;
pub mod operator;
pub mod operator_condition;
pub mod operator_group;

pub use olm_config::{Features, OLMConfig, OLMConfigSpec, OLMConfigStatus};
pub use operator::{Components, Operator, OperatorComponentCondition, OperatorSpec, OperatorStatus, RichReference};
pub use operator_condition::{OperatorCondition, OperatorConditionSpec, OperatorConditionStatus};
pub use operator_group::{OperatorGroup, OperatorGroupSpec, OperatorGroupStatus, UpgradeStrategy};
