//! Fuel: what a parent lends a child and what the child spends, and the account that keeps both.
//!
//! Fuel is counted in three units — model calls, bytes and wakes — and lent down the tree the
//! same way authority is: a loan larger than what the lender has left is refused, never clamped.
//! An [`Account`] records what its parent lent, what the agent spent itself, what it has lent out
//! to live children and what its retired children consumed; a retired child's unspent loan returns
//! to its parent. Every operation is a pure function of the account and its arguments.

use std::fmt;

use serde::{Deserialize, Serialize};

/// An amount of fuel in each of its units.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct Fuel {
    /// Model calls.
    pub model_calls: u64,
    /// Bytes (model input and output, fetched bodies).
    pub bytes: u64,
    /// Times the agent may be woken from sleep.
    pub wakes: u64,
}

impl Fuel {
    /// No fuel at all.
    pub const ZERO: Fuel = Fuel {
        model_calls: 0,
        bytes: 0,
        wakes: 0,
    };

    /// Whether every unit of `self` is at most the same unit of `other`.
    pub fn fits_in(&self, other: &Fuel) -> bool {
        self.model_calls <= other.model_calls
            && self.bytes <= other.bytes
            && self.wakes <= other.wakes
    }

    /// `self - other`, or `None` if any unit would go below zero.
    pub fn checked_sub(&self, other: &Fuel) -> Option<Fuel> {
        Some(Fuel {
            model_calls: self.model_calls.checked_sub(other.model_calls)?,
            bytes: self.bytes.checked_sub(other.bytes)?,
            wakes: self.wakes.checked_sub(other.wakes)?,
        })
    }

    /// `self + other`, or `None` on overflow.
    pub fn checked_add(&self, other: &Fuel) -> Option<Fuel> {
        Some(Fuel {
            model_calls: self.model_calls.checked_add(other.model_calls)?,
            bytes: self.bytes.checked_add(other.bytes)?,
            wakes: self.wakes.checked_add(other.wakes)?,
        })
    }
}

impl fmt::Display for Fuel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} calls, {} bytes, {} wakes",
            self.model_calls, self.bytes, self.wakes
        )
    }
}

impl Fuel {
    /// The amount in one unit.
    pub fn get(&self, unit: FuelUnit) -> u64 {
        match unit {
            FuelUnit::ModelCalls => self.model_calls,
            FuelUnit::Bytes => self.bytes,
            FuelUnit::Wakes => self.wakes,
        }
    }

    fn get_mut(&mut self, unit: FuelUnit) -> &mut u64 {
        match unit {
            FuelUnit::ModelCalls => &mut self.model_calls,
            FuelUnit::Bytes => &mut self.bytes,
            FuelUnit::Wakes => &mut self.wakes,
        }
    }

    /// Builds an amount unit by unit.
    fn from_units(amount: impl Fn(FuelUnit) -> u64) -> Fuel {
        Fuel {
            model_calls: amount(FuelUnit::ModelCalls),
            bytes: amount(FuelUnit::Bytes),
            wakes: amount(FuelUnit::Wakes),
        }
    }

    /// The first unit (in [`FuelUnit::ALL`] order) in which `self` exceeds `other`, if any: the
    /// unit a refusal names.
    pub fn first_excess_over(&self, other: &Fuel) -> Option<FuelUnit> {
        FuelUnit::ALL
            .into_iter()
            .find(|&unit| self.get(unit) > other.get(unit))
    }
}

/// One of the units fuel is counted in; refusals name the unit that ran short.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FuelUnit {
    /// [`Fuel::model_calls`].
    ModelCalls,
    /// [`Fuel::bytes`].
    Bytes,
    /// [`Fuel::wakes`].
    Wakes,
}

impl FuelUnit {
    /// Every unit, in the order refusals check them.
    pub const ALL: [FuelUnit; 3] = [FuelUnit::ModelCalls, FuelUnit::Bytes, FuelUnit::Wakes];
}

impl BudgetError {
    /// The unit the refusal is about: every budget refusal names one.
    pub fn unit(&self) -> FuelUnit {
        match self {
            BudgetError::Overdraft { unit, .. }
            | BudgetError::NotLent { unit, .. }
            | BudgetError::ConsumedBeyondLoan { unit, .. }
            | BudgetError::Overcommitted { unit, .. } => *unit,
        }
    }
}

impl fmt::Display for FuelUnit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FuelUnit::ModelCalls => "model calls",
            FuelUnit::Bytes => "bytes",
            FuelUnit::Wakes => "wakes",
        })
    }
}

/// Why a budget operation was refused. Nothing is ever clamped: the account is left unchanged.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BudgetError {
    /// A loan or a spend asked for more than the account has left.
    #[error(
        "wanted {wanted} {unit} but only {left} are left; ask for less, wait for a child to \
         retire and return its unspent loan, or ask the parent for a larger loan"
    )]
    Overdraft {
        /// The unit that ran short (the first, in [`FuelUnit::ALL`] order).
        unit: FuelUnit,
        /// What was asked for, in that unit.
        wanted: u64,
        /// What the account had left, in that unit.
        left: u64,
    },
    /// A retired child's loan is larger than what the account has lent out to live children.
    #[error(
        "settling a child's loan of {loan} {unit}, but only {lent_out} are lent out; the child \
         was not lent from this account, or was settled twice"
    )]
    NotLent {
        /// The unit that does not add up.
        unit: FuelUnit,
        /// The child's loan, in that unit.
        loan: u64,
        /// What this account has lent out, in that unit.
        lent_out: u64,
    },
    /// A retired child reports consuming more than it was lent.
    #[error(
        "a retired child reports {consumed} {unit} consumed out of a loan of {loan}; a child \
         cannot consume more than it was lent, so its record is wrong"
    )]
    ConsumedBeyondLoan {
        /// The unit that does not add up.
        unit: FuelUnit,
        /// What the child reports consumed, in that unit.
        consumed: u64,
        /// What the child was lent, in that unit.
        loan: u64,
    },
    /// An account's parts (own spend, live loans, retired consumption) add up to more than its
    /// loan, so it cannot be rebuilt.
    #[error(
        "the account commits more {unit} than its loan of {loan} (own spend, live children's \
         loans and retired children's consumption together); the stored budget is inconsistent"
    )]
    Overcommitted {
        /// The unit that does not add up.
        unit: FuelUnit,
        /// The loan, in that unit.
        loan: u64,
    },
}

/// An agent's fuel account: what its parent lent it and where that fuel went.
///
/// At all times `loan == spent + lent_out + retired_consumed + left`, unit by unit; every
/// operation either keeps that identity or is refused with the account unchanged, so no account
/// can ever go below zero and an agent out of fuel can never spend more. The fields are private so
/// the identity cannot be broken from outside; [`Account::rebuild`] is the only way to assemble one
/// from stored parts, and it checks them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "AccountParts", into = "AccountParts")]
pub struct Account {
    loan: Fuel,
    spent: Fuel,
    lent_out: Fuel,
    retired_consumed: Fuel,
    left: Fuel,
}

/// An account as stored: the left-over amount is derived, never trusted from storage.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
struct AccountParts {
    loan: Fuel,
    spent: Fuel,
    lent_out: Fuel,
    retired_consumed: Fuel,
}

impl TryFrom<AccountParts> for Account {
    type Error = BudgetError;
    fn try_from(p: AccountParts) -> Result<Self, BudgetError> {
        Account::from_parts(p.loan, p.spent, p.lent_out, p.retired_consumed)
    }
}

impl From<Account> for AccountParts {
    fn from(a: Account) -> Self {
        AccountParts {
            loan: a.loan,
            spent: a.spent,
            lent_out: a.lent_out,
            retired_consumed: a.retired_consumed,
        }
    }
}

/// Moves `amount` from `from` to `to`, or refuses naming the unit `from` is short of.
///
/// `from + to` never exceeds the account's loan (the account identity), so `to + amount` cannot
/// saturate once `amount` fits in `from`: the move is exact.
fn transfer(from: &mut Fuel, to: &mut Fuel, amount: &Fuel) -> Result<(), BudgetError> {
    if let Some(unit) = amount.first_excess_over(from) {
        return Err(BudgetError::Overdraft {
            unit,
            wanted: amount.get(unit),
            left: from.get(unit),
        });
    }
    *from = Fuel::from_units(|u| from.get(u) - amount.get(u));
    *to = Fuel::from_units(|u| to.get(u).saturating_add(amount.get(u)));
    Ok(())
}

impl Account {
    /// A fresh account: the whole loan is left, nothing spent or lent.
    pub fn new(loan: Fuel) -> Self {
        Account {
            loan,
            left: loan,
            ..Account::default()
        }
    }

    /// Assembles an account from its stored parts, refusing parts that exceed the loan. Sums are
    /// taken in `u128`, so parts that would overflow `u64` are refused, not wrapped.
    fn from_parts(
        loan: Fuel,
        spent: Fuel,
        lent_out: Fuel,
        retired_consumed: Fuel,
    ) -> Result<Self, BudgetError> {
        for unit in FuelUnit::ALL {
            let committed = u128::from(spent.get(unit))
                + u128::from(lent_out.get(unit))
                + u128::from(retired_consumed.get(unit));
            if committed > u128::from(loan.get(unit)) {
                return Err(BudgetError::Overcommitted {
                    unit,
                    loan: loan.get(unit),
                });
            }
        }
        // Every unit's parts fit in the loan (checked above), so these subtractions are exact.
        let left = Fuel::from_units(|u| {
            loan.get(u) - spent.get(u) - lent_out.get(u) - retired_consumed.get(u)
        });
        Ok(Account {
            loan,
            spent,
            lent_out,
            retired_consumed,
            left,
        })
    }

    /// Rebuilds a parent's account from its live children's loans (DESIGN §4): the loan its own
    /// parent made, its own spend, each live child's loan and what its retired children consumed.
    pub fn rebuild(
        loan: Fuel,
        own_spent: Fuel,
        live_children: &[Fuel],
        retired_consumed: Fuel,
    ) -> Result<Self, BudgetError> {
        let mut lent_out = Fuel::ZERO;
        for unit in FuelUnit::ALL {
            let sum: u128 = live_children.iter().map(|c| u128::from(c.get(unit))).sum();
            // A sum past `u64::MAX` is certainly more than the loan.
            *lent_out.get_mut(unit) =
                u64::try_from(sum).map_err(|_| BudgetError::Overcommitted {
                    unit,
                    loan: loan.get(unit),
                })?;
        }
        Self::from_parts(loan, own_spent, lent_out, retired_consumed)
    }

    /// Lends `loan` to a new child. A loan larger than what is left is refused with
    /// [`BudgetError::Overdraft`] (its only error), never clamped.
    pub fn lend(&mut self, loan: Fuel) -> Result<(), BudgetError> {
        transfer(&mut self.left, &mut self.lent_out, &loan)
    }

    /// Spends `amount` of the agent's own fuel; refused with [`BudgetError::Overdraft`] (its only
    /// error) past what is left, so an agent out of fuel can never spend more.
    pub fn spend(&mut self, amount: Fuel) -> Result<(), BudgetError> {
        transfer(&mut self.left, &mut self.spent, &amount)
    }

    /// Settles a retired child: of its `child_loan`, what it consumed stays consumed (counted in
    /// [`Account::consumed`]) and the unspent rest returns to what this account has left.
    pub fn settle_retired_child(
        &mut self,
        child_loan: Fuel,
        child_consumed: Fuel,
    ) -> Result<(), BudgetError> {
        if let Some(unit) = child_consumed.first_excess_over(&child_loan) {
            return Err(BudgetError::ConsumedBeyondLoan {
                unit,
                consumed: child_consumed.get(unit),
                loan: child_loan.get(unit),
            });
        }
        if let Some(unit) = child_loan.first_excess_over(&self.lent_out) {
            return Err(BudgetError::NotLent {
                unit,
                loan: child_loan.get(unit),
                lent_out: self.lent_out.get(unit),
            });
        }
        // `child_consumed` fits in `child_loan` (checked above), so this is exact.
        let unspent = Fuel::from_units(|u| child_loan.get(u) - child_consumed.get(u));
        let mut next = self.clone();
        transfer(
            &mut next.lent_out,
            &mut next.retired_consumed,
            &child_consumed,
        )?;
        transfer(&mut next.lent_out, &mut next.left, &unspent)?;
        *self = next;
        Ok(())
    }

    /// What the parent lent this account.
    pub fn loan(&self) -> Fuel {
        self.loan
    }

    /// What the agent spent itself.
    pub fn spent(&self) -> Fuel {
        self.spent
    }

    /// What is currently lent out to live children.
    pub fn lent_out(&self) -> Fuel {
        self.lent_out
    }

    /// What retired children consumed, including their own retired descendants.
    pub fn retired_consumed(&self) -> Fuel {
        self.retired_consumed
    }

    /// What is left to spend or lend.
    pub fn left(&self) -> Fuel {
        self.left
    }

    /// Fuel gone for good from this account: its own spend plus what retired children consumed.
    /// When this agent retires (its children retired first), this is what its parent keeps as
    /// consumed; the rest of its loan returns.
    pub fn consumed(&self) -> Fuel {
        // Both parts are bounded by the loan (the account identity), so the sum is exact.
        Fuel::from_units(|u| {
            self.spent
                .get(u)
                .saturating_add(self.retired_consumed.get(u))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fuel(model_calls: u64, bytes: u64, wakes: u64) -> Fuel {
        Fuel {
            model_calls,
            bytes,
            wakes,
        }
    }

    /// The account identity, checked from the outside.
    fn balanced(a: &Account) -> bool {
        FuelUnit::ALL.into_iter().all(|u| {
            u128::from(a.loan().get(u))
                == u128::from(a.spent().get(u))
                    + u128::from(a.lent_out().get(u))
                    + u128::from(a.retired_consumed().get(u))
                    + u128::from(a.left().get(u))
        })
    }

    #[test]
    fn lend_spend_and_settle_keep_the_identity() {
        let mut a = Account::new(fuel(10, 1_000, 3));
        a.spend(fuel(2, 100, 0)).unwrap();
        a.lend(fuel(5, 500, 1)).unwrap();
        assert_eq!(a.left(), fuel(3, 400, 2));
        assert!(balanced(&a));
        // The child consumed 1 call and 50 bytes of its loan; the rest returns.
        a.settle_retired_child(fuel(5, 500, 1), fuel(1, 50, 0))
            .unwrap();
        assert_eq!(a.left(), fuel(7, 850, 3));
        assert_eq!(a.consumed(), fuel(3, 150, 0));
        assert_eq!(a.lent_out(), Fuel::ZERO);
        assert!(balanced(&a));
    }

    #[test]
    fn overdraft_names_the_unit_and_changes_nothing() {
        let mut a = Account::new(fuel(10, 100, 0));
        let before = a.clone();
        let err = a.lend(fuel(11, 100, 0)).unwrap_err();
        assert_eq!(
            err,
            BudgetError::Overdraft {
                unit: FuelUnit::ModelCalls,
                wanted: 11,
                left: 10
            }
        );
        assert!(err.to_string().contains("11 model calls"), "{err}");
        let err = a.spend(fuel(0, 0, 1)).unwrap_err();
        assert_eq!(err.unit(), FuelUnit::Wakes);
        assert!(err.to_string().contains("1 wakes but only 0"), "{err}");
        assert_eq!(a, before);
        // Out of fuel: nothing more can be spent.
        a.spend(fuel(10, 100, 0)).unwrap();
        assert!(a.spend(fuel(1, 0, 0)).is_err());
        assert!(a.spend(Fuel::ZERO).is_ok());
    }

    #[test]
    fn settling_refuses_inconsistent_children() {
        let mut a = Account::new(fuel(10, 10, 10));
        a.lend(fuel(4, 4, 4)).unwrap();
        let before = a.clone();
        let err = a
            .settle_retired_child(fuel(4, 4, 4), fuel(4, 5, 4))
            .unwrap_err();
        assert_eq!(
            err,
            BudgetError::ConsumedBeyondLoan {
                unit: FuelUnit::Bytes,
                consumed: 5,
                loan: 4
            }
        );
        let err = a
            .settle_retired_child(fuel(5, 4, 4), Fuel::ZERO)
            .unwrap_err();
        assert!(matches!(
            err,
            BudgetError::NotLent {
                unit: FuelUnit::ModelCalls,
                loan: 5,
                lent_out: 4
            }
        ));
        assert!(err.to_string().contains("settled twice"), "{err}");
        assert_eq!(a, before);
    }

    #[test]
    fn rebuild_matches_the_operations_and_refuses_overcommitment() {
        let mut live = Account::new(fuel(10, 10, 10));
        live.spend(fuel(1, 1, 1)).unwrap();
        live.lend(fuel(2, 2, 2)).unwrap();
        live.lend(fuel(3, 0, 0)).unwrap();
        live.lend(fuel(1, 1, 1)).unwrap();
        live.settle_retired_child(fuel(1, 1, 1), fuel(1, 0, 0))
            .unwrap();
        let rebuilt = Account::rebuild(
            fuel(10, 10, 10),
            fuel(1, 1, 1),
            &[fuel(2, 2, 2), fuel(3, 0, 0)],
            fuel(1, 0, 0),
        )
        .unwrap();
        assert_eq!(rebuilt, live);

        let err = Account::rebuild(
            fuel(5, 5, 5),
            Fuel::ZERO,
            &[fuel(3, 0, 0), fuel(3, 0, 0)],
            Fuel::ZERO,
        )
        .unwrap_err();
        assert_eq!(
            err,
            BudgetError::Overcommitted {
                unit: FuelUnit::ModelCalls,
                loan: 5
            }
        );
        assert!(err.to_string().contains("inconsistent"), "{err}");
        let huge = fuel(0, u64::MAX, 0);
        let err = Account::rebuild(huge, Fuel::ZERO, &[huge, huge], Fuel::ZERO).unwrap_err();
        assert_eq!(err.unit(), FuelUnit::Bytes);
        let err = Account::rebuild(huge, huge, &[], huge).unwrap_err();
        assert_eq!(err.unit(), FuelUnit::Bytes);
    }

    #[test]
    fn stored_accounts_are_checked_when_read() {
        let mut a = Account::new(fuel(10, 10, 10));
        a.lend(fuel(3, 3, 3)).unwrap();
        let json = serde_json::to_string(&a).unwrap();
        assert!(
            json.contains("\"lent-out\"") && !json.contains("\"left\""),
            "{json}"
        );
        assert_eq!(serde_json::from_str::<Account>(&json).unwrap(), a);
        let forged = json.replace(
            "\"spent\":{\"model-calls\":0",
            "\"spent\":{\"model-calls\":8",
        );
        let err = serde_json::from_str::<Account>(&forged).unwrap_err();
        assert!(
            err.to_string().contains("more model calls than its loan"),
            "{err}"
        );
    }
}
