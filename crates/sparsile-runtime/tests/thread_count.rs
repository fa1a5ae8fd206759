//! The process-wide thread count (`set_num_threads`): it wins over the settings, is
//! checked, and can be reset. In a test binary of its own, since it is process state.

use sparsile_ir::settings::Settings;
use sparsile_runtime::jit::{
    default_threads, num_threads_set, set_num_threads, JitError, Launcher, MAX_THREADS,
};

#[test]
fn set_num_threads_overrides_the_settings_until_reset() {
    let settings = Settings {
        num_threads: Some(5),
        ..Settings::default()
    };
    assert_eq!(num_threads_set(), None);
    assert_eq!(default_threads(&settings), 5);

    set_num_threads(Some(3)).unwrap();
    assert_eq!(num_threads_set(), Some(3));
    assert_eq!(default_threads(&settings), 3);
    assert_eq!(Launcher::new(None, &settings).unwrap().threads(), 3);
    // An explicit count still wins.
    assert_eq!(Launcher::new(Some(2), &settings).unwrap().threads(), 2);

    assert!(matches!(
        set_num_threads(Some(0)),
        Err(JitError::ZeroThreads)
    ));
    assert!(matches!(
        set_num_threads(Some(MAX_THREADS + 1)),
        Err(JitError::TooManyThreads { threads, max }) if threads == MAX_THREADS + 1 && max == MAX_THREADS
    ));
    // A refused count leaves the last good one.
    assert_eq!(num_threads_set(), Some(3));

    set_num_threads(None).unwrap();
    assert_eq!(num_threads_set(), None);
    assert_eq!(default_threads(&settings), 5);
}
