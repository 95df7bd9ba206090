//! An Evictable whose tier refuses to release: the hierarchy stays live and readable, and a
//! later release succeeds (design: a release the storage refuses changes nothing).

use std::sync::atomic::{AtomicUsize, Ordering};

use strideweave::carrier::{Carrier, CarrierClass, ClassKind};
use strideweave::carriers::extension::SlotStorage;
use strideweave::carriers::Evictable;
use strideweave::{
    register_carrier_definition, CarrierDefinition, DType, Error, ErrorKind, Result,
    StorageProvider, Value,
};

/// Release calls so far, and the call number that fails (0: none).
static RELEASES: AtomicUsize = AtomicUsize::new(0);
static FAIL_AT: AtomicUsize = AtomicUsize::new(0);

#[derive(Default)]
struct Tier(Vec<Value>);

impl SlotStorage for Tier {
    fn supports_dtype(&self, dtype: DType) -> bool {
        dtype == DType::FLOAT32
    }
    fn physical_size(&self) -> usize {
        self.0.len()
    }
    fn allocate(&mut self, slots: usize, _: DType) -> Result<()> {
        self.0 = vec![Value::Float(0.0); slots];
        Ok(())
    }
    fn release(&mut self) -> Result<()> {
        let call = RELEASES.fetch_add(1, Ordering::SeqCst) + 1;
        if call == FAIL_AT.load(Ordering::SeqCst) {
            return Err(Error::Runtime(format!("release call {call} refused")));
        }
        self.0.clear();
        Ok(())
    }
    fn read(&self, index: usize) -> Result<Value> {
        Ok(self.0[index])
    }
    fn write(&mut self, index: usize, value: Value) -> Result<()> {
        self.0[index] = value;
        Ok(())
    }
}

fn hierarchy(class: CarrierClass) -> Result<Carrier> {
    let primary = Carrier::create(class, Tier::default(), 3, DType::FLOAT32, true)?;
    for i in 0..3 {
        primary.set(i, Value::Float(i as f64 + 1.0))?;
    }
    let secondary = Carrier::create(class, Tier::default(), 0, DType::FLOAT32, true)?;
    Evictable::carrier(&primary, &secondary)
}

fn values(carrier: &Carrier) -> Result<Vec<Value>> {
    (0..carrier.size()).map(|i| carrier.get(i)).collect()
}

#[test]
fn a_tier_refusing_release_leaves_the_hierarchy_live_and_readable() -> Result<()> {
    let class = CarrierClass::mint("RefusingTier", ClassKind::Independent);
    let storage = StorageProvider::from_slots::<Tier>().with_elementwise_fallback(true);
    register_carrier_definition(class, CarrierDefinition::new(storage))?;
    let expected = [1.0, 2.0, 3.0].map(Value::Float);
    // The secondary is released first; when it refuses, nothing is released.
    for fail_at in [1, 2] {
        let evictable = hierarchy(class)?;
        let version = evictable.version();
        let base = RELEASES.load(Ordering::SeqCst);
        FAIL_AT.store(base + fail_at, Ordering::SeqCst);
        let error = evictable.release().unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Runtime);
        assert!(error.to_string().contains("refused"), "{error}");
        assert!(!evictable.is_released());
        assert_eq!(
            values(&evictable)?,
            expected,
            "after release call {fail_at} was refused"
        );
        assert_eq!(evictable.version(), version);
        evictable.set(0, Value::Float(5.0))?;
        assert_eq!(evictable.get(0)?, Value::Float(5.0));
        FAIL_AT.store(0, Ordering::SeqCst);
        evictable.release()?;
        assert!(evictable.is_released());
        assert_eq!(evictable.size(), 0);
    }
    Ok(())
}
