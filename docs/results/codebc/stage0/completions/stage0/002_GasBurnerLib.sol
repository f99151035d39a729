pragma solidity ^0.8.4;

library GasBurnerLib {
    using GasBurnerLib.GasBurner;
    using GasBurnerLib.GasBurnerLib;
    using GasBurnerLib.GasBurnerLib;
    using GasBurnerLib.GasBurnerLib;
    using GasBurnerLib.GasBurnerLib;
    using GasBurnerLib.GasBurnerLib;
    using GasBurnerLib.GasBurnerLib;
    using GasBurnerLib.GasBurnerLib;
    using GasBurnerLib.GasBurnerLib;
    using GasBurnerLib.GasBurnerLib;
    using GasBurnerLib.GasBurnerLib;
    using GasBurnerLib.GasBurnerLib;
    using GasBurnerLib.GasBurnerLib;
    using GasBurnerLib.GasBurnerLib;
    using GasBurnerLib.GasBurnerLib;
    using GasBurnerLib.GasBurnerLib;
    using GasBurnerLib.GasBurnerLib;
    using GasBurnerLib.GasBurnerLib;
    using GasBurnerLib.GasBurnerLib;
    using GasBurnerLib.GasBurnerLib;
    using GasBurnerLib.GasBurnerLib;
    using GasBurnerLib.GasBurnerLib;
    using GasBurnerLib.GasBurnerLib;
    using GasBurnerLib.GasBurnerLib;
    using GasBurnerLib.GasBurnerLib;
   