pragma solidity ^0.8.0;

interface IGovernable {
    function getAccount(address account);
    function getAccounts(address[] accounts);
    function getAccounts(address[] accounts, uint256[] accounts);
    function getAccounts(address[] accounts, uint256[] accounts);
    function getAccounts(address[] accounts, uint256[] accounts);
    function getAccounts(address[] accounts, uint256[] accounts);
    function getAccounts(address[] accounts, uint256[] accounts);
    function getAccounts(address[] accounts, uint256[] accounts);
    function getAccounts(address[] accounts, uint256[] accounts);
    function getAccounts(address[] accounts, uint256[] accounts);
    function getAccounts(address[] accounts, uint256[] accounts);
    function getAccounts(address[] accounts, uint256[] accounts);
    function getAccounts(address[] accounts, uint256[] accounts);
    function getAccounts(address[] accounts, uint256[] accounts);
    function getAccounts(address[] accounts, uint256[] accounts);
    function getAccounts(address[] accounts, uint256[] accounts);
   