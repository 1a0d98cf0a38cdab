//! Request types renamed so that their names read as their endpoints
//! (`GenPro11Request` read as "11"; it is `GenPro1p1Request`, for
//! `/v1/gen-pro-1.1`). The old names stay one release as deprecated aliases,
//! in [`crate::api::types`] and in [`crate::api::types::builder`].

/// Declares the old names as deprecated aliases of the new ones, in the
/// module it is expanded in.
macro_rules! aliases {
    () => {
        $crate::renamed::aliases! {
            GenPro11Request => GenPro1p1Request, "renamed to `GenPro1p1Request`";
            GenPro11UltraRequest => GenPro1p1UltraRequest, "renamed to `GenPro1p1UltraRequest`";
            GenPro11UltraFinetunedRequest => GenPro1p1UltraFinetunedRequest, "renamed to `GenPro1p1UltraFinetunedRequest`";
            GenPro10FillRequest => GenPro1p0FillRequest, "renamed to `GenPro1p0FillRequest`";
            GenPro10FillFinetunedRequest => GenPro1p0FillFinetunedRequest, "renamed to `GenPro1p0FillFinetunedRequest`";
            GenPro10ExpandRequest => GenPro1p0ExpandRequest, "renamed to `GenPro1p0ExpandRequest`";
        }
    };
    ($($old:ident => $new:ident, $note:literal;)*) => {
        $(
            #[doc = concat!("Old name of [`", stringify!($new), "`].")]
            #[deprecated(note = $note)]
            pub type $old = $new;
        )*
    };
}

pub(crate) use aliases;
